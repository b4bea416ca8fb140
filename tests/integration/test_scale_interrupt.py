"""`ddpctl scale` interrupted with Ctrl-C (a real SIGINT to the real process): it cancels the size it was
measuring, says so, submits no further size, and exits 130."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import REPO, Cli, write_spec

pytestmark = pytest.mark.torchrun


def test_ctrl_c_cancels_the_size_being_measured(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    script = tmp_path / "long.py"
    script.write_text("from ddpctl import runtime  # (no stop warning)\nimport time\ntime.sleep(120)\n")
    spec = write_spec(
        tmp_path / "long.yaml", name="long", script=str(script), run_dir=str(tmp_path / "runs"), backend="local"
    )
    scale = subprocess.Popen(
        [sys.executable, "-m", "ddpctl", "scale", str(spec), "--nodes", "1,2"],
        cwd=REPO,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert scale.stdout is not None
        line = scale.stdout.readline()
        assert "1 node(s) x 1: job local-1" in line, line
        cli.wait_for(lambda: cli.status("local-1")["state"] == "RUNNING", timeout=60, what="local-1 RUNNING")
        scale.send_signal(signal.SIGINT)
        out, err = scale.communicate(timeout=60)
    finally:
        if scale.poll() is None:
            scale.kill()
    assert scale.returncode == 130, (out, err)
    assert "ddpctl scale: interrupted: cancelled job local-1 (1 node(s)); no further sizes submitted" in err, err
    assert "Traceback" not in err, err
    assert cli.wait_terminal("local-1", timeout=60)["state"] == "CANCELLED"
    assert [line.split('"job_id": "')[1].split('"')[0] for line in cli.run("list", "--json").stdout.splitlines()] == [
        "local-1"
    ]
