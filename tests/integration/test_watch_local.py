"""`ddpctl watch` over real local-backend runs: a job whose supervisor was killed (vanished, no decision) and one
that makes no progress past its allowance (stalled) are each recorded and told once, through `notify:`."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, write_spec

pytestmark = pytest.mark.torchrun
SLEEPER = "import time\nprint('sleeping', flush=True)\ntime.sleep(120)\n"


def spec(tmp_path: Path, name: str, told: Path, startup_s: int) -> Path:
    script = tmp_path / "sleep.py"
    script.write_text(SLEEPER)
    return write_spec(
        tmp_path / f"{name}.yaml", name=name, script=str(script), nodes=1, nproc_per_node=1, backend="local",
        run_dir=str(tmp_path / "runs"), health={"startup_s": startup_s, "hang_timeout_s": 0},
        notify={"command": ["/bin/sh", "-c", f"/bin/cat >> '{told}'; echo >> '{told}'"], "timeout_s": 5},
    )  # fmt: skip


def started(run_dir: Path) -> float | None:
    return next((e["t"] for e in events(run_dir) if e["event"] == "attempt-start"), None)


def test_watch_tells_a_vanished_and_a_stalled_run_once(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    cli = Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty)})
    told = tmp_path / "told.jsonl"
    stall_id, stall_dir = cli.submit(spec(tmp_path, "stalls", told, 2))
    gone_id, gone_dir = cli.submit(spec(tmp_path, "vanishes", told, 600))
    cli.wait_for(lambda: started(stall_dir) and started(gone_dir), timeout=120, what="both attempts started")
    assert not [line for line in cli.run("watch").stdout.splitlines() if "vanishes" in line], "nothing wrong yet"
    os.kill(int((gone_dir / "supervisor.pid").read_text().split()[0]), signal.SIGKILL)  # a job this test started
    cli.wait_for(lambda: cli.status(gone_id)["state"] == "FAILED", timeout=60, what="the killed job's end")
    time.sleep(max(0.0, (started(stall_dir) or 0) + 3 - time.time()))

    lines = sorted(cli.run("watch").stdout.splitlines())
    if len(lines) == 1:  # the stall was found by the first pass already: told there, not again
        lines.insert(0, next(e for e in events(stall_dir) if e["event"] == "watch-found")["why"])
        lines[0] = f"{stall_id} (stalls): stalled: " + lines[0]
    assert lines[0].startswith(f"{stall_id} (stalls): stalled: no step reported for ") and "allowance 2 s" in lines[0]
    assert lines[1].startswith(f"{gone_id} (vanishes): vanished: the backend says FAILED") and len(lines) == 2
    assert cli.run("watch").stdout == "", "a finding is told once"
    cli.wait_for(lambda: told.exists() and told.read_text().count("\n") >= 2, timeout=60, what="both notices")
    notices = [json.loads(line) for line in told.read_text().splitlines() if line.strip()]
    assert sorted((n["event"], n["job"]) for n in notices) == [("stalled", stall_id), ("vanished", gone_id)]
    assert [e["kind"] for e in events(gone_dir) if e["event"] == "watch-found"] == ["vanished"]
    cli.run("cancel", stall_id)
    cli.wait_terminal(stall_id)
    assert cli.run("watch").stdout == "", "a cancelled run is not judged"
