"""The requeue decision reads the run's truth from its events alone: run.markers is the one reader that turns
an attempt's marker files (stopped.json, hang.json, node-lost.json) into the events they stand for, where a
writer died between its marker and its event; the decision's modules read no marker themselves."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ddpctl.node.batch import decide_run, run_outcome
from ddpctl.run import history
from ddpctl.run.history import Hung, NodeExited, NodeLost, Stopped
from ddpctl.run.layout import RunLayout
from ddpctl.run.markers import with_markers

PKG = Path(__file__).resolve().parents[2] / "ddpctl"


def run_dir(tmp_path: Path) -> RunLayout:
    layout = RunLayout(tmp_path / "run")
    layout.attempt_dir(0).mkdir(parents=True)
    layout.spec_file.write_text("name: t\nscript: t.py\nbackend: local\n")
    return layout


def test_a_marker_without_its_event_becomes_the_event_once(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    layout.stopped_marker(0).write_text(json.dumps({"step": 7, "checkpoint": "/ck/7", "source": "file", "time": 5.0}))
    layout.hang_marker(0).write_text(json.dumps({"t": 4.0, "node": "n1", "idle_s": 31.5}))
    layout.node_lost_marker(0).write_text(json.dumps({"t": 3.0, "node": "n2", "node_rank": 1, "by": "n1", "why": "w"}))
    past = with_markers(layout, 0, history.load(layout.events))
    assert past.events == history.load(layout.events).events  # appended as they were found
    this = past.attempt(0)
    assert this.first(Stopped) == Stopped(t=5.0, attempt=0, step=7, checkpoint="/ck/7", source="file")
    assert this.first(Hung) == Hung(t=4.0, attempt=0, idle_s=31.5)
    assert this.first(NodeLost) == NodeLost(t=3.0, attempt=0, node="n2", node_rank=1, why="w", found_by="n1")
    assert with_markers(layout, 0, past) is past  # asked again: nothing twice
    assert len(history.load(layout.events).events) == 3


def test_a_marker_whose_event_was_recorded_adds_nothing(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    layout.hang_marker(0).write_text("{}")  # claimed, its record not yet finished
    history.append(layout.events, Hung(attempt=0, idle_s=12.0, allowance="by the watchdog"))
    past = history.load(layout.events)
    assert with_markers(layout, 0, past) is past


@pytest.mark.parametrize(
    ("marker", "cause", "kind"),
    [("stopped", "stop", "preemption"), ("hang", "hang", "node_failure"), ("node_lost", "node-lost", "node_failure")],
)
def test_the_decision_sees_a_lone_marker_through_its_event(tmp_path: Path, marker: str, cause: str, kind: str) -> None:
    layout = run_dir(tmp_path)
    getattr(layout, f"{marker}_marker")(0).write_text("{}")  # its writer died before the event
    history.append(layout.events, NodeExited(node="n1", attempt=0, exit=1))
    code = 0 if marker == "stopped" else 1
    alone = run_outcome(layout, history.load(layout.events), 0, code)  # reads the events it is given, no file
    assert (alone.stopped, alone.infra_cause) == (False, None)
    decision = decide_run(layout, {}, code)
    assert decision.blame is not None and (decision.blame.cause, decision.kind) == (cause, kind), decision


def test_the_decisions_modules_read_no_marker_file() -> None:
    markers = {"stopped_marker", "hang_marker", "node_lost_marker"}
    readers = []
    for name in ("batch", "decide", "blame", "repeat", "exclude", "excluding"):
        tree = ast.parse((PKG / "node" / f"{name}.py").read_text())
        readers += [
            f"node/{name}.py:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in markers
        ]
    assert readers == []
