"""The slowdown rule (ddpctl.health.slowdown), as a table of runs: each node's busy time a step over time, with
pauses, silences and restarts; looks every 10 s as the watchdog's poll takes them, from t=0 (every heartbeat
started then unless restarted). Expected: the slowdowns told, with the look that told them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ddpctl.health import runreport as rr
from ddpctl.health.htmlreport import _slowdowns
from ddpctl.health.report import collect, text_lines
from ddpctl.health.slowdown import OWN, RUN, SlowdownRule, median_without
from ddpctl.health.summary import JobView, Seat
from ddpctl.health.watchdog import Watchdog
from ddpctl.run import history
from ddpctl.run.history import RunHistory, SlowedDown
from ddpctl.run.layout import RunLayout
from ddpctl.run.notify import about
from ddpctl.spec import HealthSettings, RequeuePolicy
from ddpctl.spec.model import NotifySettings

Segments = list[tuple[float, float]]  # (from t, busy s a step)


@dataclass
class Run:
    nodes: dict[str, Segments]
    pause: dict[str, tuple[float, float]] = field(default_factory=dict)  # a declared pause, from..to
    silent: dict[str, tuple[float, float]] = field(default_factory=dict)  # the record not rewritten
    restart: dict[str, float] = field(default_factory=dict)  # the heartbeat started again (requeue, restart)


def _value(segments: Segments, t: float) -> float:
    return [v for start, v in segments if start <= t][-1]


def records(run: Run, t: float) -> dict[int, dict[str, Any]]:
    out = {}
    for rank, (node, segments) in enumerate(sorted(run.nodes.items())):
        started = run.restart[node] if node in run.restart and t >= run.restart[node] else 0.0
        record: dict[str, Any] = {"node": node, "phase": "train", "window": 20, "written": t, "started": started}
        record["busy_s"] = record["step_s"] = _value(segments, t)
        if node in run.pause and t >= run.pause[node][0]:
            since, until = run.pause[node]
            if t < until:
                record.update(phase="eval", pause={"name": "eval", "since": since})
            else:
                record["resumed"] = until
        if node in run.silent and run.silent[node][0] <= t < run.silent[node][1]:
            record["written"] = run.silent[node][0]
        out[rank] = record
    return out


def told(run: Run, until: float = 1500.0) -> list[tuple[str, str, float]]:
    rule, found, t = SlowdownRule(), [], 0.0
    while t <= until:
        found += [(s.node, s.versus, t) for s in rule.look(t, records(run, t))]
        t += 10.0
    return found


STEADY = [(0.0, 0.5)]
SLOWS_AT_600 = [(0.0, 0.5), (600.0, 1.0)]

CASES = {
    "steady nodes": (Run({"a": STEADY, "b": STEADY}), []),
    "b slows for minutes": (Run({"a": STEADY, "b": SLOWS_AT_600}), [("b", OWN, 900.0)]),
    "one node alone slows": (Run({"a": SLOWS_AT_600}), [("a", OWN, 900.0)]),
    "slow for 200 s only": (Run({"a": STEADY, "b": [(0.0, 0.5), (600.0, 1.0), (800.0, 0.5)]}), []),
    "every node slows (the run, not a node)": (Run({"a": SLOWS_AT_600, "b": SLOWS_AT_600}), []),
    "1.4x is not well above": (Run({"a": STEADY, "b": [(0.0, 0.5), (600.0, 0.7)]}), []),
    "slow start-up is warm-up": (Run({"a": STEADY, "b": [(0.0, 2.0), (290.0, 0.5)]}), []),
    "slower than the others from the start": (Run({"a": STEADY, "c": STEADY, "b": [(0.0, 1.0)]}), [("b", RUN, 600.0)]),
    "tiny steps: 10x of 1 ms is jitter": (Run({"a": [(0.0, 0.001)], "b": [(0.0, 0.001), (600.0, 0.01)]}), []),
    "slow around a declared pause": (
        Run({"a": STEADY, "b": [(0.0, 0.5), (600.0, 1.0), (850.0, 0.5)]}, pause={"b": (600.0, 800.0)}),
        [],
    ),
    "a silence starts the streak over": (
        Run({"a": STEADY, "b": SLOWS_AT_600}, silent={"b": (700.0, 800.0)}),
        [("b", OWN, 1100.0)],
    ),
    "slow while a restarted heartbeat warms up": (
        Run({"a": STEADY, "b": [(0.0, 0.5), (700.0, 1.5), (990.0, 0.5)]}, restart={"b": 700.0}),
        [],
    ),
}


@pytest.mark.parametrize(("run", "expected"), list(CASES.values()), ids=list(CASES))
def test_slowdown_table(run: Run, expected: list[tuple[str, str, float]]) -> None:
    assert told(run) == expected


def test_told_once_per_node_however_long_it_stays_slow() -> None:
    assert told(Run({"a": STEADY, "b": SLOWS_AT_600}), until=5000.0) == [("b", OWN, 900.0)]


def test_the_finding_names_the_node_and_its_figures() -> None:
    rule = SlowdownRule()
    run = Run({"a": STEADY, "b": SLOWS_AT_600})
    found = [s for t in range(0, 1000, 10) for s in rule.look(float(t), records(run, float(t)))]
    assert len(found) == 1
    one = found[0]
    assert (one.node, one.step_s, one.baseline_s, one.run_s, one.sustained_s) == ("b", 1.0, 0.5, 0.5, 300.0)
    assert one.factor == 2.0


def test_crafted_records_are_left_out() -> None:
    bad = {0: {"node": "a", "phase": "train", "window": 20, "started": 0.0, "busy_s": "x", "step_s": float("nan")},
           1: {"node": "b", "phase": "train", "window": True, "started": 0.0, "busy_s": 1.0},
           2: {"node": "c", "phase": "train", "window": 20, "started": None, "busy_s": 1.0}}  # fmt: skip
    assert SlowdownRule().look(5000.0, bad) == []


def test_the_watchdog_records_a_slowdown_once_and_status_report_and_notify_tell_it(tmp_path: Path) -> None:
    """Node 0's watchdog puts the rule beside the straggler's: the typed event in events.jsonl, once per node."""
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir(parents=True)
    watchdog = Watchdog(JobView(Seat(layout, 0, "n1", 0, 2)), HealthSettings(), end_attempt=lambda: None)
    run = Run({"a": STEADY, "b": SLOWS_AT_600})
    for t in range(0, 1500, 10):
        watchdog.report_slowdowns(records(run, float(t)), float(t))
    found = history.load(layout.events).health()
    assert len(found) == 1 and isinstance(found[0], SlowedDown)
    assert (found[0].node, found[0].versus, found[0].factor, found[0].sustained_s) == ("b", OWN, 2.0, 300)
    line = "\n".join(text_lines(collect(layout.root, running=False)))
    assert "slowdown in attempt 0: node b at 1.0 s/step = 2.0x its own earlier pace (0.5 s) for 5m00s" in line
    event = found[0]
    assert about(event, RunHistory((event,)), RequeuePolicy()) == "slowdown"
    assert "slowdown" in NotifySettings().on


def test_the_report_lists_the_slowdowns(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    history.append(layout.events, SlowedDown(attempt=0, node="<b>", step_s=1.0, baseline_s=0.5, versus=OWN, factor=2.0))
    html = "".join(_slowdowns(rr.collect(layout.root)))
    assert 'id="slowdowns"' in html and "node &lt;b&gt; at 1.0 s/step" in html


@pytest.mark.parametrize(
    ("ordered", "value", "median"),
    [([1.0], 1.0, None), ([1.0, 2.0], 1.0, 2.0), ([1.0, 2.0], 2.0, 1.0), ([1.0, 2.0, 4.0], 2.0, 2.5),
     ([1.0, 2.0, 2.0, 9.0], 2.0, 2.0), ([1.0, 3.0, 5.0, 7.0], 7.0, 3.0), ([1.0, 3.0, 5.0, 7.0], 1.0, 5.0)],
)  # fmt: skip
def test_median_without_one(ordered: list[float], value: float, median: float | None) -> None:
    assert median_without(ordered, value) == median
