"""The registry survives damaged lines: each is skipped with one warning naming the file and line (issue 10 #5)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from clitools import Cli

from ddpctl.run.registry import parse_record

GOOD = {"job_id": "local-7", "name": "good", "run_dir": "", "backend": "local", "submitted_at": 1.0}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"\xff\xfe", "not a JSON line"),
        (b"[1]", "not a JSON object but list"),
        (b"{", "not a JSON line"),
        (json.dumps({**GOOD, "submitted_at": "yesterday"}).encode(), "submitted_at is 'yesterday', not int or float"),
        (json.dumps({**GOOD, "submitted_at": True}).encode(), "submitted_at is True"),
        (json.dumps({**GOOD, "submitted_at": float("nan")}).encode(), "not a time"),
        (json.dumps({**GOOD, "job_id": 3}).encode(), "job_id is 3, not str"),
        (json.dumps({**GOOD, "pid": "12"}).encode(), "pid is '12'"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "run_dir"}).encode(), "run_dir is missing"),
    ],
)
def test_damaged_lines_are_rejected_with_the_reason(line: bytes, problem: str) -> None:
    record, why = parse_record(line)
    assert record is None and problem in why


def test_every_command_works_past_damaged_lines(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run_dir = tmp_path / "run"
    (run_dir / "attempt-0").mkdir(parents=True)
    (run_dir / "attempt-0" / "rank-0.log").write_text("hello from rank 0\n")
    (run_dir / "events.jsonl").write_text(
        json.dumps({"event": "decision", "action": "finish", "exit_code": 0, "reason": "done", "attempt": 0}) + "\n"
    )
    good = json.dumps({**GOOD, "run_dir": str(run_dir), "submitted_at": time.time()}).encode()
    bad = [b"\xff", b"[1]", json.dumps({**GOOD, "job_id": "x", "submitted_at": "yesterday"}).encode()]
    (home / "registry.jsonl").write_bytes(b"\n".join([bad[0], good, *bad[1:]]) + b"\n")
    cli = Cli(home)
    for args in (["list", "--json"], ["status", "good", "--json"], ["logs", "good", "--no-color"], ["cancel", "good"]):
        done = cli.run(*args, check=False)
        assert "Traceback" not in done.stderr, done.stderr
        warnings = [line for line in done.stderr.splitlines() if "skipped" in line]
        assert [w.split(" line ")[1].split(":")[0] for w in warnings] == ["1", "3", "4"], done.stderr
        assert all(str(home / "registry.jsonl") in w for w in warnings)
    assert '"state": "COMPLETED"' in cli.run("status", "good", "--json").stdout
    assert "hello from rank 0" in cli.run("logs", "good", "--no-color").stdout
