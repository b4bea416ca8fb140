"""The run report's pure parts: chart input from a literal history and series, and what the SVG/HTML escape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpctl.health import htmlreport, runreport, svgplot
from ddpctl.health.runreport import RankSeries, RunData
from ddpctl.run.history import RunHistory
from ddpctl.runtime.series import SeriesRead

EVENTS: list[dict[str, Any]] = [
    {"event": "attempt-start", "t": 100.0, "attempt": 0, "nodes": "a,b"},
    {"event": "stop", "t": 150.0, "attempt": 0, "step": 40, "checkpoint": "step-40"},
    {"event": "decision", "t": 160.0, "attempt": 0, "action": "requeue", "kind": "preemption", "reason": "preempted"},
    {"event": "attempt-start", "t": 300.0, "attempt": 1, "nodes": "a,c"},
    {"event": "resume", "t": 301.0, "attempt": 1, "step": 40},
    {"event": "decision", "t": 400.0, "attempt": 1, "action": "finish", "exit_code": 0, "reason": "completed"},
]


def points(attempt: int, start: float, steps: range, busy: float) -> list[dict[str, Any]]:
    return [
        {"t": start + i, "step": s, "samples": 8 * (i + 1), "step_s": 1.0, "busy_s": busy, "v": {"loss": 1.0 / s}}
        for i, s in enumerate(steps)
    ]


def run_data(node_b: str = "b") -> RunData:
    series = [
        RankSeries(0, 0, "a", SeriesRead(points(0, 100, range(1, 41), 0.9))),
        RankSeries(0, 1, node_b, SeriesRead(points(0, 100, range(1, 41), 0.3))),
        RankSeries(1, 0, "a", SeriesRead(points(1, 300, range(41, 81), 0.5))),
    ]
    return RunData(Path("/runs/x"), RunHistory.from_records(EVENTS), series, "name: x\n", now=500.0)


def test_attempt_spans_carry_cause_kind_and_markers() -> None:
    spans = runreport.spans(RunHistory.from_records(EVENTS), now=500.0)
    assert [(s.start, s.end, s.kind) for s in spans] == [(100.0, 160.0, "stop"), (300.0, 400.0, "ok")]
    assert "preemption → requeue (preempted)" in spans[0].label and "on a,b" in spans[0].label
    assert [m.label for m in spans[0].marks] == ["stop at step 40: checkpoint step-40"]


def test_a_running_attempt_ends_now() -> None:
    spans = runreport.spans(RunHistory.from_records(EVENTS[:4]), now=500.0)
    assert (spans[1].end, spans[1].kind) == (500.0, "running")


def test_chart_input_per_node_per_attempt_and_per_rank() -> None:
    data = run_data()
    assert {line.label for line in runreport.step_lines(data.series)} == {"a busy", "a step", "b busy", "b step"}
    rates = {line.label: line.points for line in runreport.rate_lines(data.series)}
    assert set(rates) == {"a", "b"} and rates["b"][0] == (101.0, 8.0)
    loss = runreport.value_lines(data.series, "loss")
    assert [line.label for line in loss] == ["attempt 0", "attempt 1"] and loss[1].points[0] == (41.0, 1.0 / 41)
    assert [m.x for m in runreport.resume_marks(data.history)] == [40.0]
    assert runreport.busy_rows(data.series) == [("rank 0 a", 0.5, 0.5)]


def test_untrusted_names_are_escaped_everywhere() -> None:
    evil = '"><script>alert(1)</script>'
    data = run_data(node_b=evil)
    data.series[1].read.points[0]["v"] = {evil: 1.0}
    head = htmlreport.Header(evil, "7", "COMPLETED", evil, "local", evil)
    page = htmlreport.run_page(head, data)
    assert "<script" not in page and "&lt;script&gt;" in page
    assert page.count("<svg") >= 4


def test_an_empty_chart_says_so() -> None:
    assert "no data" in svgplot.line_chart("x", [], x_label="t", y_label="y")
    assert 'data-chart="busy"' in svgplot.busy_bars("busy", [])


def test_long_series_are_thinned_when_drawn() -> None:
    line = svgplot.Line("l", [(float(i), float(i)) for i in range(10 * svgplot.MAX_DRAWN)])
    drawn = svgplot.line_chart("x", [line], x_label="t", y_label="y")
    assert f'data-points="{svgplot.MAX_DRAWN}"' in drawn


def test_a_requeue_gap_cuts_the_line() -> None:
    points = [(0.0, 1.0), (1.0, 1.0), (2.0, 1.0), (500.0, 2.0), (501.0, 2.0)]
    assert svgplot.segments(points) == [points[:3], points[3:]]
    drawn = svgplot.line_chart("x", [svgplot.Line("n", points)], x_label="t", y_label="y")
    assert drawn.count('data-series="n"') == 2 and drawn.count(">n</text>") == 1


def test_paths_in_the_home_directory_are_written_from_tilde(monkeypatch: Any) -> None:
    """A report goes to colleagues: the writer's home (the run dir, the spec's paths, a checkpoint, a code
    snapshot's source) is `~`, a path merely containing the home's text is left alone."""
    monkeypatch.setenv("HOME", "/home/ann")
    data = run_data()
    data.run_dir = Path("/home/ann/runs/x")
    data.history = RunHistory.from_records(
        [{**e, "checkpoint": "/home/ann/runs/x/checkpoints/step-40"} if e["event"] == "stop" else e for e in EVENTS]
    )
    data.spec_text = "script: /home/ann/proj/train.py\nrun_dir: /home/ann/runs\nother: /srv/home/ann/data\n"
    head = htmlreport.Header("x", "7", "COMPLETED", "", "local", "code: directory /home/ann/proj; snapshot 1: 2 files")
    page = htmlreport.run_page(head, data)
    assert "run dir ~/runs/x" in page and "script: ~/proj/train.py" in page and "run_dir: ~/runs\n" in page
    assert "code: directory ~/proj;" in page and "other: /srv/home/ann/data" in page
    assert "checkpoint ~/runs/x/checkpoints/step-40</title>" in page
    assert "/home/ann/" not in page.replace("/srv/home/ann/", "")
    assert htmlreport.home_relative("/home/annabel/x", "/home/ann") == "/home/annabel/x"
    assert htmlreport.home_relative("/home/ann/x", "/") == "/home/ann/x"
