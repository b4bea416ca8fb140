"""Unplanned failures end to end on the real local backend (issue 26): what ended each attempt, and a loop of
the same crash broken by requeue.max_stalled_attempts instead of spending the whole budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import EXAMPLE_SCRIPT, REPO, Cli, events, write_spec

pytestmark = pytest.mark.torchrun


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", cwd=REPO)


def test_the_same_crash_at_the_same_step_ends_after_three_stalled_attempts(cli: Cli, tmp_path: Path) -> None:
    # Checkpoints at step 2; rank 1 raises at step 3 in every attempt. The budget would allow 20 requeues.
    spec = write_spec(
        tmp_path / "loop.yaml",
        name="loop",
        script=str(EXAMPLE_SCRIPT),
        args=["--epochs", "1", "--samples", "512", "--ckpt-every", "2", "--crash-at-step", "3", "--crash-rank", "1"],
        nodes=1,
        nproc_per_node=2,
        run_dir=str(tmp_path / "runs"),
        env={"OMP_NUM_THREADS": "1"},
        backend="local",
    )
    done = cli.run("submit", str(spec), "--set", "requeue.max_failures=20", "--wait", check=False)
    job_id = done.stdout.split("job ", 1)[1].split()[0]
    (run_dir,) = (tmp_path / "runs" / "loop").iterdir()
    status = cli.status(job_id)

    decisions = [e for e in events(run_dir) if e["event"] == "decision"]
    summary = [(d["attempt"], d["action"], d["kind"], d.get("stalled")) for d in decisions]
    # Attempt 0 saved step 2 (progress); attempts 1-3 resumed from it and saved nothing newer.
    assert summary == [
        (0, "requeue", "failure", None),
        (1, "requeue", "failure", 1),
        (2, "requeue", "failure", 2),
        (3, "finish", "failure", 3),
    ], decisions
    resumed = [(e["attempt"], e["step"]) for e in events(run_dir) if e["event"] == "resume"]
    assert resumed == [(0, None), (1, 2), (2, 2), (3, 2)], resumed
    assert all(
        (d["cause"], d["cause_rank"], d["cause_why"])
        == ("script-error", 1, "RuntimeError: injected crash at step 3 on rank 1")
        for d in decisions
    ), decisions
    last = decisions[-1]["reason"]
    assert "3 attempts in a row ended without a complete checkpoint newer than the one they resumed from (step 2)" in (
        last
    ), last
    assert (status["state"], status["restarts"], done.returncode) == ("FAILED", 3, 1), status
    assert "max_stalled_attempts=3" in status["reason"], status
