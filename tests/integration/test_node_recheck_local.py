"""A node's checks during training (issue 46 item 5, `health.node_check_every_min`) on the real local backend.

Two simulated nodes train (a torch-free script with ddpctl's heartbeat, so each attempt costs torchrun's start and
no torch import in the ranks); the site's check runs on each node every 3 s (the floor) and passes until the test
creates a flag file, after step 2 of attempt 0: from then on it fails on local2 only, in its own words. The attempt
ends with cause `node-check` blamed on local2, which is excluded: the next attempt launches on local1 and local3,
and is cancelled there (its training would prove nothing more, and torchrun's start costs 10-25 s on a loaded
2-core machine). `status`, `logs --errors` and the `node-check` event say the check's last line.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from clitools import Cli, events, reached_step, write_spec

pytestmark = pytest.mark.torchrun

SCRIPT = """
import os, time
from ddpctl.runtime import Heartbeat
steps = 300 if os.environ["DDPCTL_ATTEMPT"] == "0" else 5  # attempt 0 ends by its node check, long before
beat = Heartbeat(total_steps=steps)
for step in range(1, steps + 1):
    time.sleep(0.1)
    beat.step(step)
print(f"rank {os.environ['RANK']} trained {steps} steps", flush=True)
"""
WORDS = "GPU 0: 2 uncorrectable ECC errors since the driver loaded"


def test_a_check_that_starts_failing_mid_training_ends_the_attempt_and_excludes_its_node(tmp_path: Path) -> None:
    script, flag = tmp_path / "code" / "train_a_bit.py", tmp_path / "sick"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    sick = f'[ "$DDPCTL_NODE" = local2 ] && [ -e {flag} ]'
    check = f'echo "diag on $DDPCTL_NODE"; if {sick}; then echo "{WORDS}"; exit 1; fi'
    spec = write_spec(
        tmp_path / "recheck.yaml", name="recheck", script=str(script), nodes=2, nproc_per_node=1, gpus_per_node=0,
        run_dir=str(tmp_path / "runs"), backend="local",
        health={"preflight": False, "node_check": check, "node_check_every_min": 0.05},
    )  # fmt: skip
    cli = Cli(tmp_path / "home")
    started = time.monotonic()
    job_id, run_dir = cli.submit(spec)
    cli.wait_for(lambda: reached_step(run_dir / "attempt-0", 2), timeout=90, what="step 2 of attempt 0")
    flag.touch()
    sick_at = time.time()
    cli.wait_for(lambda: len(launched(run_dir, 1)) == 2, timeout=90, what="attempt 1 launched")
    took = time.monotonic() - started
    cli.run("cancel", job_id)
    record = [e for e in events(run_dir) if e["event"] in ("node-check", "decision", "node-excluded", "node-exit")]
    assert launched(run_dir, 1) == {"local1", "local3"}, record

    [found] = [e for e in record if e["event"] == "node-check"]
    assert (found["attempt"], found["node"], found["failed"], found["stage"]) == (0, "local2", True, "site"), found
    assert found["why"] == f"node_check exited 1; last output: {WORDS}", found
    assert found["output"] == ["diag on local2", WORDS], found
    decision = next(e for e in record if e["event"] == "decision" and e["attempt"] == 0)
    assert (decision["cause"], decision["cause_node"], decision["kind"]) == ("node-check", "local2", "node_failure")
    assert decision["cause_why"] == f"site: node_check exited 1; last output: {WORDS}", decision
    assert [(e["node"], e["cause"]) for e in record if e["event"] == "node-excluded"] == [("local2", "node-check")]
    print(
        f"check failed {found['t'] - sick_at:.1f} s after the node turned sick (every 3 s), the attempt decided"
        f" {decision['t'] - sick_at:.1f} s after; attempt 1 launched {took:.1f} s after the submit"
    )
    assert found["t"] - sick_at < 10, found

    line = f"attempt 0 ended by node-check: local2: site: node_check exited 1; last output: {WORDS}"
    text = cli.run("status", job_id).stdout
    assert line in text, text
    assert f"node check in attempt 0 on local2 failed: site: node_check exited 1; last output: {WORDS}" in text, text
    errors = cli.run("logs", job_id, "--errors", "--attempt", "0", "--no-color").stdout
    assert line in errors, errors
    assert cli.wait_terminal(job_id, timeout=60)["state"] == "CANCELLED"


def launched(run_dir: Path, attempt: int) -> set[str]:
    return {e["node"] for e in events(run_dir) if e["event"] == "launch" and e["attempt"] == attempt}
