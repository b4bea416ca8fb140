"""Waiting on a local job through the real CLI (issue 45, item 8): Ctrl-C during `submit --wait` says the job
keeps running and how to follow it, and the job does keep running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import Cli, write_spec

pytestmark = pytest.mark.torchrun

SLOW = "import time\nfor i in range(120):\n    print('step', i, flush=True)\n    time.sleep(0.5)\n"


def test_ctrl_c_during_submit_wait_leaves_the_job_running_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    spec = write_spec(
        tmp_path / "job.yaml",
        name="waited",
        script="slow.py",
        nodes=1,
        nproc_per_node=1,
        run_dir=str(tmp_path / "runs"),
        backend="local",
    )
    cli = Cli(tmp_path / "state", cwd=tmp_path)
    waiting = subprocess.Popen(
        [sys.executable, "-m", "ddpctl", "submit", str(spec), "--wait"],
        cwd=tmp_path,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiting.stdout is not None
        while "waited" not in (line := waiting.stdout.readline()) or "RUNNING" not in line:
            assert line, "submit --wait ended before the job ran"
        os.kill(waiting.pid, signal.SIGINT)
        _, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    job_id = "local-1"
    assert waiting.returncode == 130
    assert f"stopped waiting; job {job_id} (waited) keeps running" in err, err
    assert f"`ddpctl logs -f {job_id}`" in err and f"`ddpctl cancel {job_id}`" in err, err
    assert "Traceback" not in err
    assert cli.status(job_id)["state"] == "RUNNING"
    cli.run("cancel", job_id)
