"""Progress records are rank output, untrusted: a bad one is skipped with one note, never a crash in status,
status --json or top (a string step crashed health.rates.summarize; NaN times crashed rates.duration)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ddpctl import safeio
from ddpctl.cli.top import frame_facts
from ddpctl.health.hang import check_hang
from ddpctl.health.records import checked_progress_records, placements
from ddpctl.health.report import collect, text_lines
from ddpctl.health.results import read_task
from ddpctl.health.summary import JobView, Seat, summary_ranks
from ddpctl.health.watchdog import Watchdog
from ddpctl.run.layout import RunLayout
from ddpctl.spec import HealthSettings


def write(attempt_dir: Path, rank: int, text: str) -> None:
    (attempt_dir / f"progress-{rank}.json").write_text(text)


def test_bad_records_are_skipped_with_one_note_each_and_nothing_crashes(tmp_path: Path) -> None:
    now = time.time()
    attempt_dir = tmp_path / "attempt-0"
    attempt_dir.mkdir()
    good = {"rank": 0, "node": "n1", "step": 5, "total_steps": 10, "t": now - 1, "step_s": 0.5, "phase": "train"}
    write(attempt_dir, 0, json.dumps({**good, "history": [[now - 3, 3, 30], [now - 1, 5, 50]]}))
    write(attempt_dir, 1, json.dumps({**good, "rank": 1, "step": "7"}))
    write(attempt_dir, 2, json.dumps({**good, "rank": 2, "t": float("nan")}))  # json writes NaN
    write(attempt_dir, 3, json.dumps({**good, "rank": 3, "step_s": float("inf")}))
    write(attempt_dir, 4, json.dumps({**good, "rank": 4, "history": [[float("nan"), 5, 50], [now - 1, 5, 50]]}))
    write(attempt_dir, 5, "{torn")  # a torn read: skipped without a note

    records, notes = checked_progress_records(RunLayout(tmp_path), 0)
    assert sorted(records) == [0, 4]
    assert notes == [
        "skipped attempt-0/progress-1.json: step is '7', expected an integer or null",
        "skipped attempt-0/progress-2.json: t is nan, expected a finite number or null",
        "skipped attempt-0/progress-3.json: step_s is inf, expected a finite number or null",
    ]
    report = collect(tmp_path, running=True, now=now)
    assert report["progress"]["ranks"] == 2 and report["record_notes"] == notes
    json.dumps(report)  # status --json
    lines = text_lines(report)
    assert lines[0].startswith("  step 5 of 10 (2 ranks reporting)")
    assert sum("note: skipped" in line for line in lines) == 3
    frame = frame_facts(tmp_path, now)  # top
    assert [row.rank for row in frame["rows"]] == [0, 4] and frame["summary"].step == 5


HUGE = int("9" * 400)  # json.loads takes it; float() and math.isfinite() of it raise OverflowError


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"t": HUGE}, "t"),
        ({"step_s": HUGE}, "step_s"),
        ({"started": HUGE}, "started"),
        ({"samples": HUGE}, "samples"),
        ({"window": HUGE}, "window"),
        ({"history": [[1.0, 2, 3], [2.0, HUGE, 4]]}, "history[1][1]"),
        ({"phase": "eval", "pause": {"name": "eval", "allowance_s": HUGE}}, "pause.allowance_s"),
        ({"values": {"loss": HUGE}}, "values.loss"),
        ({"extremes": {"loss": [0.5, HUGE]}}, "extremes.loss[1]"),
    ],
)
def test_a_number_beyond_64_bits_anywhere_skips_the_record_and_nothing_crashes(
    tmp_path: Path, extra: dict[str, Any], named: str
) -> None:
    """One record with a 400-digit integer killed the watchdog thread and crashed status, top and results."""
    now = time.time()
    attempt_dir = tmp_path / "attempt-0"
    attempt_dir.mkdir()
    (tmp_path / "job.yaml").write_text("name: x\n")
    good = {"rank": 0, "node": "n1", "step": 5, "total_steps": 10, "t": now - 1, "step_s": 0.5, "phase": "train"}
    write(attempt_dir, 0, json.dumps({**good, "values": {"loss": 0.25}}))
    write(attempt_dir, 1, json.dumps({**good, "rank": 1, **extra}))

    records, notes = checked_progress_records(RunLayout(tmp_path), 0)
    assert sorted(records) == [0]
    assert notes == [f"skipped attempt-0/progress-1.json: {named} is a 400-digit integer, expected below 2**63"]
    json.dumps(collect(tmp_path, running=True, now=now))  # status, status --json
    assert [row.rank for row in frame_facts(tmp_path, now)["rows"]] == [0]  # top
    assert read_task(tmp_path).final == {"loss": 0.25}  # sweep results
    view = JobView(Seat(RunLayout(tmp_path), 0, "n1", 0, 1))  # what the watchdog thread reads
    assert sorted(view.records()) == [0]
    assert check_hang(now, now - 100, view.records(), HealthSettings()) is None


def test_a_huge_integer_in_a_node_summary_drops_only_that_rank() -> None:
    good = {"step": 5, "t": 1.0, "node": "n1"}
    found = {"seq": 1, "ranks": {"0": good, "1": {**good, "step_s": HUGE}}}
    assert summary_ranks(found) == {0: good}


def test_a_record_nested_past_the_parsers_depth_reads_as_absent(tmp_path: Path) -> None:
    """json.loads raises RecursionError (not ValueError) on deep nesting: it must read as a torn record."""
    path = tmp_path / "progress-0.json"
    path.write_text('{"history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert safeio.read_json(path) is None


def test_a_placement_with_a_huge_integer_is_skipped(tmp_path: Path) -> None:
    attempt_dir = tmp_path / "attempt-0"
    attempt_dir.mkdir()
    (attempt_dir / "rank-0.json").write_text(json.dumps({"rank": 0, "node": "n1", "pid": 12, "main_thread": 3}))
    (attempt_dir / "rank-1.json").write_text(json.dumps({"rank": 1, "node": "n1", "pid": HUGE, "main_thread": 3}))
    assert sorted(placements(RunLayout(tmp_path), 0)) == [0]


def test_the_watchdog_thread_outlives_a_failed_poll(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Whatever a rank's file holds, the node's watchdog keeps watching (it died, and the job trained unwatched)."""
    calls: list[Path] = []

    def flaky(path: Path) -> dict[str, Any] | None:
        calls.append(path)
        if len(calls) == 1:
            raise OverflowError("int too large to convert to float")
        return safeio.read_json(path)

    (tmp_path / "attempt-0").mkdir()
    write(tmp_path / "attempt-0", 0, json.dumps({"rank": 0, "node": "n1", "step": 1, "t": time.time()}))
    view = JobView(Seat(RunLayout(tmp_path), 0, "n1", 0, 1), read=flaky)
    watchdog = Watchdog(view, HealthSettings(), end_attempt=lambda: None)
    watchdog.start()
    time.sleep(2.6)
    try:
        assert watchdog._thread.is_alive() and len(calls) >= 2
    finally:
        watchdog.stop()
    assert capfd.readouterr().out.count("a poll failed, watching on: OverflowError") == 1
