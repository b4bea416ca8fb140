"""Issue 43 item 12: during a pause the script declared (`Heartbeat.pause`), `status`, `status --json` and `top`
honour it as the hang watchdog does (its own allowance, else `health.pause_s`, on top of the stall limit): no
"stalled", no STALL; past that allowance they say stalled again. Read from a run dir as the commands read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddpctl.cli.top import frame_facts
from ddpctl.health.rates import summarize
from ddpctl.health.report import collect, text_lines
from ddpctl.health.topjson import as_json, facts_of
from ddpctl.health.view import rank_rows
from ddpctl.run.layout import RunLayout
from ddpctl.run.state import JobState
from ddpctl.spec import HealthSettings

NOW = 10_000.0


def paused(idle_s: float, allowance_s: float | None = None, name: str = "eval") -> dict[str, Any]:
    """A rank whose last step was `idle_s` ago (0.2 s steps: 10 s stall limit), in a declared pause since."""
    pause: dict[str, Any] = {"name": name, "since": NOW - idle_s}
    if allowance_s is not None:
        pause["allowance_s"] = allowance_s
    return {"step": 50, "t": NOW - idle_s, "started": NOW - 900, "step_s": 0.2, "phase": name, "pause": pause}


def run_dir(tmp_path: Path, records: dict[int, dict[str, Any]], pause_s: int | None = None) -> Path:
    layout = RunLayout(tmp_path / "run")
    layout.attempt_dir(0).mkdir(parents=True)
    health = f"health:\n  pause_s: {pause_s}\n" if pause_s is not None else ""
    layout.spec_file.write_text(f"name: p\nscript: train.py\n{health}")
    for rank, record in records.items():
        layout.progress_file(0, rank).write_text(json.dumps(record))
    return layout.root


def test_status_and_its_json_do_not_call_a_declared_pause_a_stall(tmp_path: Path) -> None:
    report = collect(run_dir(tmp_path, {0: paused(120), 1: paused(121)}), running=True, now=NOW)
    assert report["progress"]["stalled"] is False, report
    assert report["progress"]["paused"] == "eval", report
    text = "\n".join(text_lines(report))
    assert "stalled" not in text and "declared pause (eval)" in text, text


def test_a_pause_past_its_allowance_is_a_stall_again(tmp_path: Path) -> None:
    report = collect(run_dir(tmp_path, {0: paused(120, allowance_s=60)}), running=True, now=NOW)
    assert report["progress"]["stalled"] is True
    report = collect(run_dir(tmp_path / "b", {0: paused(120)}, pause_s=30), running=True, now=NOW)
    assert report["progress"]["stalled"] is True  # the spec's health.pause_s, as the watchdog reads it
    assert summarize({0: paused(120)}, NOW, pause_s=200).stalled is False


def test_top_and_its_json_show_a_pause_not_a_stall(tmp_path: Path) -> None:
    facts = frame_facts(run_dir(tmp_path, {0: paused(120), 1: {**paused(120), "phase": "train", "pause": None}}), NOW)
    rows = {row.rank: row for row in facts["rows"]}
    assert (rows[0].stall, rows[0].pause) == (False, "eval")
    assert (rows[1].stall, rows[1].pause) == (True, "")  # the other rank declared nothing: a stall
    data = json.loads(json.dumps(as_json("1", "p", JobState("RUNNING"), facts)))
    assert data["rows"][0]["stall"] is False and data["summary"]["stalled"] is False
    assert facts_of(data)["rows"] == facts["rows"] and facts_of(data)["summary"].paused == "eval"


def test_a_rank_row_past_its_pause_allowance_is_a_stall() -> None:
    rows = rank_rows({0: paused(120, allowance_s=60)}, {}, nodes={}, flagged=[], policy=HealthSettings(), now=NOW)
    assert rows[0].stall is True
    rows = rank_rows({0: paused(120)}, {}, nodes={}, flagged=[], policy=HealthSettings(pause_s=30), now=NOW)
    assert rows[0].stall is True
    rows = rank_rows({0: paused(120)}, {}, nodes={}, flagged=[], policy=HealthSettings(), now=NOW)
    assert rows[0].stall is False


def test_the_top_screen_says_pause_not_stall(tmp_path: Path) -> None:
    from rich.console import Console

    from ddpctl.cli.top_render import frame
    from ddpctl.run.registry import JobRecord

    facts = frame_facts(run_dir(tmp_path, {0: paused(120), 1: paused(121)}), NOW)
    console = Console(width=120, height=24, record=True, force_terminal=True, color_system=None)
    console.print(
        frame(JobRecord("local-7", "p", "/nonexistent", "local", 0.0), JobState("RUNNING"), facts, console.size)
    )
    text = console.export_text()
    assert "STALL" not in text and "PAUSE eval" in text and "paused (eval)" in text, text
