"""`ddpctl top` in a real pseudo-terminal (pexpect, 80x24) against a running local job: it draws the ranks,
follows the requeue after a preemption and exits by itself when the job ends."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from clitools import REPO, TERMINAL, Cli, write_spec

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.torchrun


def test_top_follows_a_requeue_and_exits_with_the_job(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", cwd=REPO)
    spec = write_spec(
        tmp_path / "live.yaml",
        name="live",
        script=str(REPO / "jobs/example/train.py"),
        args=["--epochs", "2", "--samples", "1024", "--ckpt-every", "2", "--sleep-per-step", "0.5"],
        nodes=1,
        nproc_per_node=2,
        run_dir=str(tmp_path / "runs"),
        env={"OMP_NUM_THREADS": "1"},
        backend="local",
    )
    job_id, _run_dir = cli.submit(spec)
    top = pexpect.spawn(
        sys.executable,
        ["-m", "ddpctl", "top", job_id, "--interval", "0.5"],
        cwd=str(REPO),
        env=cli.env,
        dimensions=(24, 80),
        encoding="utf-8",
        timeout=180,
    )
    try:
        top.expect(r"RUNNING \| attempt 0 \| step [2-9]\d*/16")
        top.expect(r"\s1 │ local1 │")  # a row for rank 1 on its node
        cli.run("preempt", job_id)
        top.expect(r"attempt 1 \| step \d+/16", timeout=240)
        top.expect(r"ended: COMPLETED", timeout=240)
        top.expect(pexpect.EOF, timeout=30)
    finally:
        top.close(force=True)
        if cli.status(job_id)["state"] not in TERMINAL:
            cli.run("cancel", job_id, check=False)  # a failed expectation must not leave the job running
    assert top.exitstatus == 0
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", top.before or "")
    assert all(len(line) <= 80 for line in screen.splitlines())
