"""README's "Quickstart on a cluster", run exactly as written (minus `pip install`), on the real local Slurm
cluster and, with `--backend local` added to doctor and submit, on the local backend."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import REPO
from slurmtools import scancel_and_wait
from stubtools import write_command

README = REPO / "README.md"
STEP_RE = re.compile(r"\[example\] step (\d+)/\d+ epoch \d+ loss (\S+) running (\S+)")


def quickstart() -> list[str]:
    text = README.read_text()
    block = text.split("## Quickstart on a cluster", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if c and not c.startswith("pip install")]


def local_variant(command: str) -> str:
    words = command.split()
    return command + " --backend local" if words[1:2] in (["doctor"], ["submit"]) else command


def run_quickstart(tmp_path: Path, local: bool) -> dict[str, subprocess.CompletedProcess[str]]:
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")  # the spec's run_dir ../runs is then tmp_path/runs
    bin_dir = write_command(tmp_path / "bin", "ddpctl", f'#!/bin/sh\nexec {sys.executable} -m ddpctl "$@"\n').parent
    env = {
        **os.environ,
        "DDPCTL_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in quickstart():
        command = local_variant(line) if local else line
        result = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        done[line.removeprefix("ddpctl ")] = result  # by the README's own line: "logs -f example", ...
        assert result.returncode == 0, f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return done


def check(done: dict[str, subprocess.CompletedProcess[str]]) -> None:
    logs = done["logs -f example"].stdout
    assert "stop agreed at step" in logs and "resumed from step" in logs, logs[-3000:]
    assert "WARNING" not in done["preempt example"].stderr, done["preempt example"].stderr  # it listens for stops
    status = done["status example"].stdout
    assert "COMPLETED (training completed) restart 1" in status, status
    assert "resumed from step" in status and "acknowledged" in status, status
    assert "find_unused_parameters" not in logs, "the example's DDP advice leaked into the logs"
    # The running loss carries on across the resume (it used to restart from 0 and show a dip).
    steps = {int(m[0]): (float(m[1]), float(m[2])) for m in STEP_RE.findall(logs)}
    resumed = int(logs.split("resumed from step ", 1)[1].split()[0])
    loss, running = steps[resumed + 1]
    assert abs(running - (0.9 * steps[resumed][1] + 0.1 * loss)) < 2e-4, (resumed, steps)
    check_plain_script(done)


def check_plain_script(done: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """The plain script's rehearsal: its own handler got the stop, it saved, and the next attempt went on from
    the step after the one it stopped at."""
    assert "WARNING" not in done["preempt own-checkpoint"].stderr, done["preempt own-checkpoint"].stderr
    logs = done["logs -f own-checkpoint"].stdout
    stopped = re.search(r"stopping at step (\d+) for requeue", logs)
    assert stopped and f"resumed from step {stopped[1]}" in logs, logs[-3000:]
    status = done["status own-checkpoint"].stdout
    assert "COMPLETED (training completed) restart 1" in status, status
    assert "preemption stop acknowledged" in status and "(nothing lost)" in status, status


def test_quickstart_on_the_local_backend(tmp_path: Path) -> None:
    check(run_quickstart(tmp_path, local=True))


@pytest.mark.one_slurm_version  # the README's commands; every one runs on 24.11 in other tests
@pytest.mark.slurm
def test_quickstart_on_the_local_cluster(tmp_path: Path) -> None:
    try:
        check(run_quickstart(tmp_path, local=False))
    finally:
        # Run dirs only: Slurm's output files (.slurm-<id>.out) lie beside them.
        bases = [tmp_path / "runs" / name for name in ("example", "own-checkpoint")]
        scancel_and_wait([p.name for base in bases if base.exists() for p in base.glob("*") if p.name.isdigit()])
