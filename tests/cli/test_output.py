"""What a person reads: finished-job status, --wait progress, list at 80 columns, closed pipes (issue 11, 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddpctl.cli.jobreport import lines, payload
from ddpctl.cli.waiting import poll_until_terminal
from ddpctl.run import history
from ddpctl.run.history import AttemptStarted, Resumed
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState
from ddpctl.run.summary import format_elapsed, last_step_in, summarize

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "?"), (0.4, "0s"), (9.6, "10s"), (65, "1m05s"), (3723, "1h02m03s")]
)
def test_format_elapsed(seconds: float | None, text: str) -> None:
    assert format_elapsed(seconds) == text


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ("", None),
        ("[example] step 5/12 epoch 0\n", 5),
        ("step 3/9\nsaved step 10\ndone: 12 steps in 3s\n", 10),
        ("stop agreed at step 7\n", 7),
        ("steps=4\n", None),
    ],
)
def test_last_step_in(text: str, step: int | None) -> None:
    assert last_step_in(text) == step


def finished_run(tmp_path: Path) -> JobRecord:
    layout = RunLayout(tmp_path / "run")
    for attempt in (0, 1):
        layout.attempt_dir(attempt).mkdir(parents=True)
    layout.rank_log(0, 0).write_text("[example] step 1/4\n[example] step 2/4\n")
    layout.rank_log(1, 0).write_text("[example] resumed from step 2\n[example] step 3/4\n[example] step 4/4\n")
    history.append(layout.events, AttemptStarted(attempt=0, nodes="node[1-2]"))
    history.append(layout.events, AttemptStarted(attempt=1, nodes="node[1-2]"))
    history.append(layout.events, Resumed(attempt=1, step=2))
    return JobRecord(job_id="29", name="ex", run_dir=str(layout.root), backend="local", submitted_at=0.0)


def test_finished_status_has_no_empty_fields_and_tells_the_story(tmp_path: Path) -> None:
    record = finished_run(tmp_path)
    cancelled = JobState("CANCELLED", 1)  # what scontrol leaves of a cancelled job: no reason, nodes, elapsed
    data = payload(record, cancelled)
    assert all(value not in ("", None) for key, value in data.items() if key != "newest_checkpoint"), data
    assert data["newest_checkpoint"] is None  # none written: null, not a guess
    assert (data["nodes"], data["last_step"], data["attempts"], data["exit_code"]) == ("node[1-2]", 4, 2, 1)
    text = lines(record, cancelled)
    assert text[0] == "29  ex  CANCELLED (cancelled) restart 1", text
    assert "(None)" not in "\n".join(text) and "restarts 1, last step 4" in text[1], text
    assert "attempt 1: resumed from step 2" in text[-1], text
    assert summarize(RunLayout(Path(record.run_dir))).last_step == 4


def test_the_newest_checkpoint_is_in_status_json_and_the_api(tmp_path: Path) -> None:
    """Issue 45: neither `status` nor the API said which checkpoint a resume would start from."""
    from ddpctl.api import Job

    record = finished_run(tmp_path)
    checkpoints = RunLayout(Path(record.run_dir)).default_checkpoints
    for step in (4, 8):
        (checkpoints / f"step-{step}").mkdir(parents=True)
    (checkpoints / "step-4" / "COMPLETE").write_text('{"time": 1.0}')  # step-8 is still being written
    newest = checkpoints / "step-4"
    assert f"  newest checkpoint: {newest}" in lines(record, JobState("COMPLETED", 1))
    assert payload(record, JobState("COMPLETED", 1))["newest_checkpoint"] == str(newest)
    assert Job(record).newest_checkpoint() == newest


def test_wait_shows_state_then_step_and_elapsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = finished_run(tmp_path)
    seq = iter(
        [
            JobState("PENDING", reason="Resources"),
            JobState("RUNNING", elapsed="0:05"),
            JobState("RUNNING", elapsed="0:20"),
            JobState("RUNNING", elapsed="0:21"),
            JobState("COMPLETED", 1, "training completed"),
        ]
    )
    clock = iter([0.0, 0.0, 1.0, 2.0, 20.0, 20.0, 21.0, 22.0, 23.0])
    shown: list[str] = []
    monkeypatch.setattr("ddpctl.cli.waiting.POLL_S", 0.0)
    final = poll_until_terminal(record, shown.append, live=False, query=lambda _r: next(seq), clock=lambda: next(clock))
    assert final.state == "COMPLETED"
    assert shown == [  # 0:20 and 0:21 changed nothing (the step is still 4): no line repeated
        "PENDING (Resources)",
        "RUNNING, step 4, elapsed 0:05",
        "COMPLETED (training completed) restart 1",
    ], shown


def test_wait_keeps_alive_after_a_long_time_without_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = finished_run(tmp_path)
    seq = iter([JobState("PENDING", reason="Priority")] * 4 + [JobState("COMPLETED", 1, "training completed")])
    clock = iter([0.0, 0.0, 0.0, 100.0, 299.0, 301.0, 301.0, 302.0, 303.0])
    shown: list[str] = []
    monkeypatch.setattr("ddpctl.cli.waiting.POLL_S", 0.0)
    poll_until_terminal(record, shown.append, live=False, query=lambda _r: next(seq), clock=lambda: next(clock))
    assert shown == ["PENDING (Priority)", "PENDING (Priority)", "COMPLETED (training completed) restart 1"], shown


def cli(home: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDPCTL_HOME": str(home), "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    done: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
        [sys.executable, "-m", "ddpctl", *args], text=True, env=env, timeout=60, check=False, **kw
    )
    return done


def test_list_fits_80_columns(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    for n in range(3):
        registry.add(
            JobRecord(
                job_id=f"local-{n}",
                name="a-rather-long-experiment-name-" * 2 + str(n),
                run_dir=str(tmp_path / ("deep/" * 20) / str(n)),
                backend="local",
                submitted_at=1.7e9 + n,
                final_state="COMPLETED",
            )
        )
    done = cli(tmp_path, "list", capture_output=True)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert len(rows) == 4 and all(len(row) <= 80 for row in rows), done.stdout


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    record = finished_run(tmp_path)
    Registry(tmp_path).add(record)
    read, write = os.pipe()
    os.close(read)  # like `| head -1` after its line: every write now fails with EPIPE
    try:
        done = cli(tmp_path, "status", "29", stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(cli(tmp_path, "status", "29", "--json", capture_output=True).stdout)["job_id"] == "29"


def test_status_step_comes_from_the_heartbeat_not_the_log_text(tmp_path: Path) -> None:
    """Issue 43 item 16: with progress records the step is the heartbeat's, whatever rank 0's log says."""
    record = finished_run(tmp_path)
    layout = RunLayout(Path(record.run_dir))
    layout.rank_log(1, 0).write_text("[example] step 3/4\nwarmup step 99999\n")
    layout.progress_file(1, 0).write_text(json.dumps({"step": 8, "t": 1.0}))
    layout.progress_file(1, 1).write_text(json.dumps({"step": 7, "t": 1.0}))
    assert summarize(layout).last_step == 8
    assert "last step 8" in lines(record, JobState("COMPLETED", 1))[1]
    layout.rank_log(1, 0).write_text("no steps in this log\n")
    assert payload(record, JobState("COMPLETED", 1))["last_step"] == 8


@pytest.mark.parametrize(
    ("records", "step"),
    [
        ([{"step": None, "t": 1.0}], None),  # a heartbeat before its first step: no step, and no log grep
        ([{"step": 10**400}, {"step": 5}], 5),  # an out-of-range number from a rank is skipped, not shown
        ([{"step": True}, {"step": "9"}, {"step": -3}], None),
        (["torn", {"step": 2}], 2),
    ],
)
def test_status_step_from_heartbeat_records_is_bounded(tmp_path: Path, records: list[Any], step: int | None) -> None:
    layout = RunLayout(tmp_path / "run")
    layout.attempt_dir(0).mkdir(parents=True)
    layout.rank_log(0, 0).write_text("warmup step 99999\n")
    for rank, body in enumerate(records):
        text = body if isinstance(body, str) else json.dumps(body)
        layout.progress_file(0, rank).write_text(text)
    assert summarize(layout).last_step == step
