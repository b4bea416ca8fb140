"""Progress records are rank output, untrusted: a bad one is skipped with one note, never a crash in status,
status --json or top (a string step crashed health.rates.summarize; NaN times crashed rates.duration)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ddpctl.cli.top import frame_facts
from ddpctl.health.records import checked_progress_records
from ddpctl.health.report import collect, text_lines
from ddpctl.run.layout import RunLayout


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
