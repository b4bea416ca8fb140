"""The Python API on the real local backend (no Slurm): submit, wait, logs (also followed), preempt, cancel.

The same calls the CLI is built on, in this process; the jobs themselves are real torchrun processes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from clitools import example_spec

import ddpctl
from ddpctl.api import Job, LogLine
from ddpctl.errors import WaitTimeout

pytestmark = pytest.mark.torchrun

STEP = re.compile(r"\[example\] step (\d+)/")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One registry for the module: local job numbers (and so the derived MASTER_PORTs) differ between tests,
    # where a fresh registry per test would give each its first job the port the previous test's job just used.
    return tmp_path_factory.mktemp("home")


@pytest.fixture(autouse=True)
def registry(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPCTL_HOME", str(home))
    monkeypatch.chdir(tmp_path)


def first_step(job: Job) -> LogLine:
    """Follow rank 0 until its first training step, then stop reading (the follower must let go)."""
    for line in job.logs(follow=True, rank=0):
        if STEP.search(line.text):
            return line
    raise AssertionError(f"job {job.job_id} ended without a step: {job.status()}")


def test_submit_wait_and_read_the_logs(tmp_path: Path) -> None:
    job = ddpctl.submit(
        example_spec(tmp_path, "api", run_dir="runs", backend="sbatch"), backend="local", overrides=["nproc_per_node=1"]
    )
    assert (job.backend, job.run_dir) == ("local", tmp_path / "runs" / "api" / job.job_id)
    assert ddpctl.job("api").job_id == job.job_id
    final = job.wait(timeout=300)
    assert (final.state, final.restarts, final.exit_code) == ("COMPLETED", 0, 0)
    lines = list(job.logs(rank=1))
    assert lines and {line.rank for line in lines} == {1} and {line.attempt for line in lines} == {0}
    assert {line.node for line in lines} <= {"local1", "local2"}
    assert any(line.text.startswith("[ddpctl.worker] rank=1 ") for line in lines)
    assert any(line.text.startswith("final-weights-sha256=") for line in job.logs(rank=0, grep="^final-"))


def test_preempt_then_resume(tmp_path: Path) -> None:
    job = ddpctl.submit(
        example_spec(tmp_path, "preempted", "--sleep-per-step", "0.5", run_dir="runs", backend="sbatch"),
        backend="local",
    )
    assert first_step(job).rank == 0  # its node may still be None: placement files can trail the first lines
    job.preempt()
    final = job.wait(timeout=300)
    assert (final.state, final.restarts) == ("COMPLETED", 1)
    assert {line.attempt for line in job.logs(rank=0, attempt="all")} == {0, 1}


def test_wait_times_out_then_cancel(tmp_path: Path) -> None:
    job = ddpctl.submit(
        example_spec(tmp_path, "cancelled", "--sleep-per-step", "2", run_dir="runs", backend="sbatch"), backend="local"
    )
    with pytest.raises(WaitTimeout, match="still"):
        job.wait(timeout=0.2, poll_s=0.05)
    first_step(job)
    job.cancel()
    assert job.wait(timeout=120).state == "CANCELLED"


def test_a_failed_run_says_its_first_error_in_status_wait_and_the_cli(tmp_path: Path) -> None:
    """A FAILED run's state carries the first error `logs --errors` finds, not only the spent budget."""
    spec = example_spec(
        tmp_path, "crash", "--crash-at-step", "3", "--crash-rank", "1", run_dir="runs", backend="sbatch"
    )
    job = ddpctl.submit(spec, backend="local", overrides=["nodes=1"])
    final = job.wait(timeout=300)
    assert final.state == "FAILED", final
    said = "first error in attempt 0: rank 1 on local1, train.py:"  # the user's frame (issue 45 item 6)
    assert "failure budget spent" in final.reason and said in final.reason, final.reason
    assert final.reason.endswith("RuntimeError: injected crash at step 3 on rank 1"), final.reason
    assert job.status().reason == final.reason  # what `status` and `submit --wait` print
