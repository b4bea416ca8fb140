"""The rendered batch script against a job that starts before `ddpctl submit` has committed its run dir.

The sbatch backend no longer holds the job until the run dir exists, so the batch shell itself waits for
<run_base>/<job id>/job.yaml before anything reads the run dir. The script runs under real bash; only srun
and the node-side python are stand-ins on PATH (they record that they ran and whether the run dir was there).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from stubtools import on_path, write_command

from ddpctl.plan.render import RenderInputs, render_script
from ddpctl.spec import load_spec, resolve_paths

ROOT = Path(__file__).resolve().parents[2]

STUB = """#!/bin/bash
# Records its argv and whether the run dir was committed when it was called.
run_dir="{base}/4242"
echo "$(basename "$0") $* | committed=$([ -e "$run_dir/job.yaml" ] && echo yes || echo no)" >> {log}
case "$*" in *"internal decide"*) echo done ;; esac
exit 0
"""


def start(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[str], Path, Path]:
    base = tmp_path / "runs" / "example"
    base.mkdir(parents=True)
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    for name in ("srun", "py"):
        write_command(bin_dir, name, STUB.format(base=base, log=log))
    spec = resolve_paths(load_spec(ROOT / "jobs" / "example.yaml"), ROOT)
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(spec, RenderInputs(run_base=base, python=str(bin_dir / "py"))))
    full_env = {**os.environ, "PATH": on_path(bin_dir), "SLURM_JOB_ID": "4242", **env}
    child = subprocess.Popen(["bash", str(script)], env=full_env, stderr=subprocess.PIPE, text=True)
    return child, base, log


def test_a_job_that_starts_first_waits_for_its_run_dir(tmp_path: Path) -> None:
    child, base, log = start(tmp_path)
    time.sleep(0.6)
    assert not log.exists(), "nothing may run before the run dir exists"
    stage = base / ".staging-x"
    stage.mkdir()
    (stage / "job.yaml").write_text("name: example\n")
    stage.rename(base / "4242")  # what submit's commit does
    _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    calls = log.read_text().splitlines()
    assert any(line.startswith("srun ") for line in calls)
    assert all(line.endswith("committed=yes") for line in calls), calls


def test_a_run_dir_that_never_comes_ends_the_job_with_one_line(tmp_path: Path) -> None:
    t0 = time.monotonic()
    child, base, log = start(tmp_path, DDPCTL_RUN_DIR_WAIT_S="1")
    _, err = child.communicate(timeout=30)
    assert child.returncode == 1
    assert time.monotonic() - t0 < 10
    assert err == f"ddpctl: no run directory {base}/4242 after 1 s: its submit did not finish\n"
    assert not log.exists(), "srun and ddpctl must not run without a run dir"
