"""The rendered batch script, EXECUTED by bash with a stub srun that never ends (a step Slurm cannot end while one of
its nodes is frozen or cut off) and the real `python -m ddpctl internal decide`: once the launchers recorded a lost
node (node-lost.json), the shell stops waiting for srun within a few seconds and the attempt is decided, charged to
requeue.max_node_failures; without that file it keeps waiting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from stubtools import RECORDING_STUB, on_path, recorded_argv, write_command

from ddpctl.plan.render import LOST_WAIT_S, RenderInputs, render_script
from ddpctl.spec import load_spec, resolve_paths, spec_to_mapping

# srun: its last argument is the run dir; a node is lost (the launchers leave the file) and the step never ends.
# With LEFT, the surviving launchers (those node ranks) leave LEFT_AFTER_S later, and the stub notes it lived to see it.
SRUN = """for last; do :; done
sleep "${LOSE_AFTER_S:-0}"
[ -n "${LOSE:-}" ] && echo {} >"$last/attempt-0/node-lost.json"
if [ -n "${LEFT:-}" ]; then
    sleep "$LEFT_AFTER_S"
    for rank in $LEFT; do : >"$last/attempt-0/left-node-$rank"; done
    : >"$last/srun-saw-them-leave"
fi
exec sleep 60
"""
ANSWERS = {"srun": SRUN, "sbatch": "echo 99\n", "scontrol": "exit 0\n", "squeue": "echo 4242.0; echo 4242.batch\n"}


def prepare(tmp_path: Path, nodes: int = 1) -> Path:
    for name in ("srun", "scontrol", "scancel", "squeue", "sbatch"):
        write_command(tmp_path / "bin", name, RECORDING_STUB + ANSWERS.get(name, ""))
    (tmp_path / "train.py").write_text("")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump({"name": "c", "script": "train.py", "run_dir": "runs", "nodes": nodes}))
    spec = resolve_paths(load_spec(spec_file, check_paths=False), tmp_path)
    run_dir = tmp_path / "runs" / "c" / "4242"
    (run_dir / "attempt-0").mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))
    (run_dir / "job.sbatch").write_text(
        render_script(spec, RenderInputs(run_base=run_dir.parent, python=sys.executable))
    )
    # the requeued job's `sleep 300` (waiting to be stopped by the requeue) is cut short: a stub sleep
    write_command(tmp_path / "bin", "sleep", '#!/bin/bash\n[ "$1" = 300 ] && exit 0\nexec /bin/sleep "$@"\n')
    return run_dir


def run(tmp_path: Path, run_dir: Path, timeout: float, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": on_path(tmp_path / "bin"), "STUB_OUT": str(tmp_path / "out"), "SLURM_JOB_ID": "4242"}
    env.pop("DDPCTL_CHAIN_ATTEMPT", None)
    return subprocess.run(
        ["bash", str(run_dir / "job.sbatch")],
        cwd=tmp_path,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        start_new_session=True,
    )


def test_the_shell_ends_a_step_srun_cannot_end_once_a_node_is_lost(tmp_path: Path) -> None:
    run_dir = prepare(tmp_path)
    started = time.monotonic()
    done = run(tmp_path, run_dir, timeout=50, LOSE="1", LOSE_AFTER_S="1")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "a node was lost" in done.stderr and "srun still waits for it: ending the step" in done.stderr
    assert took < 1 + LOST_WAIT_S + 1 + 15, took  # lost after 1 s; the wait; the watch's poll; decide's start
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    decision = next(e for e in records if e["event"] == "decision")
    assert (decision["action"], decision["kind"], decision["step_exit"]) == ("requeue", "node_failure", 137)
    # Not a requeue of this job (Slurm holds it until it gives up on the node): a successor depending on nothing.
    sbatch = recorded_argv(tmp_path / "out", "sbatch")
    assert not any(a.startswith("--dependency") for a in sbatch) and sbatch[-2:] == [str(run_dir), "1"], sbatch
    assert records[-1]["event"] == "chain-submit" and records[-1]["job_id"] == "99", records[-1]
    assert not (tmp_path / "out" / "scontrol").exists()
    for _ in range(50):  # the step's scancel runs in the background
        if (tmp_path / "out" / "scancel" / "env.0").exists():
            break
        time.sleep(0.1)
    assert recorded_argv(tmp_path / "out", "scancel") == ["--signal=KILL", "4242.0"]


def test_without_a_lost_node_the_shell_waits_for_srun(tmp_path: Path) -> None:
    run_dir = prepare(tmp_path)
    try:
        run(tmp_path, run_dir, timeout=1 + LOST_WAIT_S + 4)
        raise AssertionError("the batch shell stopped waiting for a step with no node lost")
    except subprocess.TimeoutExpired:
        pass
    assert not (run_dir / "events.jsonl").exists()


def test_the_shell_waits_for_the_surviving_launchers_to_leave_then_ends_the_step(tmp_path: Path) -> None:
    # 3 nodes, node 1 lost: the other two take 5 s to record their exits (a loaded node). The shell ends the step
    # once both have left, not after a fixed wait that killed them first (their node-exit events then missing).
    run_dir = prepare(tmp_path, nodes=3)
    started = time.monotonic()
    done = run(tmp_path, run_dir, timeout=60, LOSE="1", LOSE_AFTER_S="1", LEFT="0 2", LEFT_AFTER_S="5")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "srun still waits for it: ending the step" in done.stderr
    assert (run_dir / "srun-saw-them-leave").exists(), done.stderr  # srun lived until they had left
    assert took < 1 + 5 + 2 + 15, took  # not the whole LOST_WAIT_S once they left; decide's start
