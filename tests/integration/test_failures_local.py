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


def test_the_same_crash_at_the_same_step_twice_ends_the_run(cli: Cli, tmp_path: Path) -> None:
    # Checkpoints at step 2; rank 1 raises at step 3 in every attempt. The budget would allow 20 requeues, and
    # requeue.max_stalled_attempts (3) would end it after the fourth attempt; the same failure at the same step and
    # place on two consecutive attempts ends it after the second (ddpctl.node.repeat; the stalled rule's own table
    # is tests/node/test_blame.py).
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
    # Attempt 0 saved step 2 (progress); attempt 1 resumed from it, saved nothing newer and failed the same way.
    assert summary == [(0, "requeue", "failure", None), (1, "finish", "failure", 1)], decisions
    resumed = [(e["attempt"], e["step"]) for e in events(run_dir) if e["event"] == "resume"]
    assert resumed == [(0, None), (1, 2)], resumed
    assert all(
        (d["cause"], d["cause_rank"], d["cause_why"])
        == ("script-error", 1, "RuntimeError: injected crash at step 3 on rank 1")
        for d in decisions
    ), decisions
    last = decisions[-1]["reason"]
    assert last.startswith("the same failure at step 3 on attempts 0 and 1 (RuntimeError: injected crash"), last
    assert last.endswith("the script's, not a node's; not retried"), last
    assert (status["state"], status["restarts"], done.returncode) == ("FAILED", 1, 1), status
    assert "the same failure at step 3 on attempts 0 and 1" in status["reason"], status
