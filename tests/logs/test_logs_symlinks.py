"""`ddpctl logs` never follows a symlink planted in a run dir (issue 10 #13)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_logs_support import append, make_attempt

from ddpctl.run.registry import JobRecord, Registry

SHADOW_LINE = "root:$6$secret-hash:19000:0:99999:7:::"


def test_a_symlinked_rank_log_is_named_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text(SHADOW_LINE + "\n")
    run_dir = tmp_path / "runs" / "j" / "5"
    attempt = make_attempt(run_dir, 0, {"node1": [0, 1]})
    append(attempt / "rank-0.log", b"rank 0 line\n")
    (attempt / "rank-1.log").symlink_to(secret)
    (attempt / "node-1.json").symlink_to(secret)
    Registry(tmp_path).add(JobRecord("5", "j", str(run_dir), "local", 1.0, final_state="COMPLETED"))
    env = {**os.environ, "DDPCTL_HOME": str(tmp_path)}
    for args in ([], ["--errors"], ["--json"], ["-f"]):
        done = subprocess.run(
            [sys.executable, "-m", "ddpctl", "logs", "j", "--no-color", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "secret-hash" not in done.stdout + done.stderr
        if not args or args == ["-f"]:
            assert "[a0 node1 r0] rank 0 line" in done.stdout
            assert "[a0 node1 r1] [ddpctl] not shown: rank-1.log is a symbolic link" in done.stdout
