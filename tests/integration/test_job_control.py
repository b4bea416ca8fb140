"""cancel/preempt of a finished job: the same words and exit status on every backend (real CLI, real backends)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import Cli, write_spec


def quick_job(cli: Cli, tmp_path: Path, backend: str) -> str:
    script = tmp_path / "quick.py"
    script.write_text("from ddpctl import runtime  # handles stops (no warning)\nprint('hello', flush=True)\n")
    spec = write_spec(
        tmp_path / "quick.yaml",
        name="quick",
        script=str(script),
        run_dir=str(tmp_path / "runs"),
        backend=backend,
        time="00:05:00",
        requeue={"lead_s": 30},
    )
    job_id, _ = cli.submit(spec)
    return job_id


def check_finished_job_control(cli: Cli, job_id: str) -> None:
    status = cli.wait_terminal(job_id, timeout=180)
    assert status["state"] == "COMPLETED", status
    for action in ("cancel", "preempt"):
        done = cli.run(action, job_id, check=False)
        assert done.returncode == 1, (action, done.stdout, done.stderr)
        assert done.stdout == "" and done.stderr == (
            f"ddpctl: error: job {job_id} (quick) already ended: COMPLETED (training completed); nothing to {action}\n"
        ), (action, done.stderr)


def test_local_backend_finished_job(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    check_finished_job_control(cli, quick_job(cli, tmp_path, "local"))


@pytest.mark.slurm
def test_sbatch_backend_finished_job(tmp_path: Path, cleanup_jobs: Callable[[str], str]) -> None:
    cli = Cli(tmp_path / "home")
    check_finished_job_control(cli, cleanup_jobs(quick_job(cli, tmp_path, "sbatch")))
