"""What `ddpctl report` draws, gathered from a run dir: the history's attempts, each rank's series, the spec.

Pure where it can be: `spans`, `step_lines`, `rate_lines`, `value_lines` and `busy_rows` turn what was read
into chart input (svgplot), so the tables of tests need no run dir. Everything a rank wrote (its node name,
its value names) stays untrusted data here; svgplot and htmlreport escape it where it is shown.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl import safeio
from ddpctl.health.mfu import Mfu, of_records
from ddpctl.health.records import checked_progress_records
from ddpctl.health.report import run_spec
from ddpctl.health.svgplot import Line, Mark, Span
from ddpctl.run import history
from ddpctl.run.history import (
    Attempt,
    Decided,
    NodeChecked,
    NodeExcluded,
    NodeLost,
    RunHistory,
    SlowedDown,
    Stopped,
)
from ddpctl.run.layout import RunLayout
from ddpctl.runtime.series import SeriesRead, attempt_series

MAX_SPEC_BYTES = 64 << 10
MAX_VALUE_CHARTS = 6  # the user's scalars drawn besides the loss


@dataclass
class RankSeries:
    attempt: int
    rank: int
    node: str
    read: SeriesRead


@dataclass
class RunData:
    run_dir: Path
    history: RunHistory
    series: list[RankSeries]
    spec_text: str
    now: float
    problems: list[str] = field(default_factory=list)  # what could not be read, said in the report
    mfu: Mfu | None = None  # of the newest attempt with a throughput (ddpctl.health.mfu)


def collect(run_dir: Path, now: float | None = None) -> RunData:
    layout = RunLayout(run_dir)
    past = history.load(layout.events)
    data = RunData(run_dir, past, [], _spec_text(layout), time.time() if now is None else now)
    attempts = sorted(set(past.attempts) | set(_attempt_dirs(layout)))
    for attempt in attempts:
        for rank, read in sorted(attempt_series(layout, attempt).items()):
            data.series.append(RankSeries(attempt, rank, _node_of(layout, attempt, rank), read))
            if read.error:
                data.problems.append(f"attempt {attempt} rank {rank}: series not read ({read.error})")
            if read.unreadable:
                data.problems.append(f"attempt {attempt} rank {rank}: {read.unreadable} unreadable series line(s)")
            if read.truncated:
                data.problems.append(f"attempt {attempt} rank {rank}: series larger than the bound, start read")
    data.mfu = _mfu(layout, data.series)
    return data


def _mfu(layout: RunLayout, series: list[RankSeries]) -> Mfu:
    newest = max((one.attempt for one in series if one.read.points), default=None)
    if newest is None:
        return Mfu(None, "no rank wrote a series yet")
    records = checked_progress_records(layout, newest)[0]
    spec = run_spec(layout)
    return of_records(records, steady_samples_per_s(series, newest), spec.mfu if spec else None)


def steady_samples_per_s(series: list[RankSeries], attempt: int) -> float | None:
    """The attempt's samples a second over the second half of each rank's series (past start-up and warm-up),
    summed over its ranks; None unless every rank has two points there."""
    total = 0.0
    ranks = [one for one in series if one.attempt == attempt]
    for one in ranks:
        points = [p for p in one.read.points if "samples" in p]
        half = points[len(points) // 2 :]
        if len(half) < 2 or half[-1]["t"] <= half[0]["t"]:
            return None
        total += (half[-1]["samples"] - half[0]["samples"]) / (half[-1]["t"] - half[0]["t"])
    return total if ranks else None


def _attempt_dirs(layout: RunLayout) -> list[int]:
    from ddpctl.run.layout import attempts_in

    try:
        return attempts_in(p.name for p in layout.root.iterdir())
    except OSError:
        return []


def _spec_text(layout: RunLayout) -> str:
    data = safeio.read_bounded(layout.spec_file, MAX_SPEC_BYTES)
    return data.decode(errors="replace") if data else ""


def _node_of(layout: RunLayout, attempt: int, rank: int) -> str:
    record = safeio.read_json(layout.progress_file(attempt, rank)) or {}
    node = record.get("node")
    return str(node)[:64] if isinstance(node, str) and node else "?"


def attempt_end(past: RunHistory, number: int, now: float) -> float:
    """When an attempt ended: its decision, else the next attempt's start, else its newest event (or now)."""
    this = past.attempt(number)
    if this.decision is not None and this.decision.t is not None:
        return this.decision.t
    following = past.attempts.get(number + 1)
    if following is not None and following.start is not None and following.start.t is not None:
        return following.start.t
    return now if not past.ended(number) else max((e.t for e in this.events if e.t), default=now)


def describe_attempt(this: Attempt) -> tuple[str, str]:
    """A label (cause, decision, reason, nodes) and the colour kind of one attempt."""
    decision, start = this.decision, this.start
    nodes = f" on {start.nodes}" if start is not None and start.nodes else ""
    if decision is None:
        return f"attempt {this.number}{nodes}: running (or ended without a decision)", "running"
    cause = decision.cause or decision.kind or ("completed" if decision.exit_code == 0 else "ended")
    kind = "ok" if decision.action == "finish" and decision.exit_code == 0 else "failure"
    if decision.action == "requeue" and decision.kind in ("preemption", "timeout"):
        kind = "stop"
    reason = f" ({decision.reason})" if decision.reason else ""
    return f"attempt {this.number}{nodes}: {cause} → {decision.action}{reason}", kind


def spans(past: RunHistory, now: float) -> list[Span]:
    out = []
    for number, this in past.attempts.items():
        start = this.start.t if this.start is not None and this.start.t is not None else None
        start = start if start is not None else min((e.t for e in this.events if e.t), default=None)
        if start is None:
            continue
        label, kind = describe_attempt(this)
        out.append(Span(label, start, max(start, attempt_end(past, number, now)), kind, _marks(this)))
    return out


def _marks(this: Attempt) -> list[Mark]:
    marks: list[Mark] = []
    for event in this.events:
        if event.t is None:
            continue
        if isinstance(event, Stopped):
            marks.append(Mark(event.t, f"stop at step {event.step}: checkpoint {event.checkpoint or '?'}"))
        elif isinstance(event, NodeExcluded):
            marks.append(Mark(event.t, f"node {event.node} excluded ({event.cause}) {event.why}"))
        elif isinstance(event, NodeChecked):
            marks.append(Mark(event.t, f"preflight {event.node}: {'ok' if event.ok else 'failed ' + event.stage}"))
        elif isinstance(event, NodeLost):
            marks.append(Mark(event.t, f"node lost: {event.node or '?'} {event.why}"))
        elif isinstance(event, SlowedDown):
            marks.append(Mark(event.t, f"slowdown: node {event.node} {event.factor}x {event.versus}"))
        elif isinstance(event, Decided) and event.cause_why:
            marks.append(Mark(event.t, f"{event.cause}: {event.cause_why}"))
    return marks


def _by_node(series: list[RankSeries]) -> dict[str, list[RankSeries]]:
    by_node: dict[str, list[RankSeries]] = defaultdict(list)
    for one in series:
        by_node[one.node].append(one)
    return dict(sorted(by_node.items()))


def step_lines(series: list[RankSeries]) -> list[Line]:
    """Per node, its busiest rank's step time over wall time (a slow node's stays above the others')."""
    lines = []
    for node, ranks in _by_node(series).items():
        points = sorted((p["t"], p["busy_s"]) for r in ranks for p in r.read.points if "busy_s" in p)
        lines.append(Line(f"{node} busy", _per_time_max(points)))
        steps = sorted((p["t"], p["step_s"]) for r in ranks for p in r.read.points if "step_s" in p)
        lines.append(Line(f"{node} step", _per_time_max(steps)))
    return [line for line in lines if line.points]


def _per_time_max(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """One point a second: the node's highest (its slowest rank's) value in that second."""
    out: dict[int, float] = {}
    for t, value in points:
        out[int(t)] = max(value, out.get(int(t), value))
    return sorted((float(t), v) for t, v in out.items())


def rate_lines(series: list[RankSeries]) -> list[Line]:
    """Samples a second per node: each rank's samples between points, summed over the node's ranks."""
    lines = []
    for node, ranks in _by_node(series).items():
        total: dict[int, float] = defaultdict(float)
        for one in ranks:
            points = [p for p in one.read.points if "samples" in p]
            for a, b in itertools.pairwise(points):
                if b["t"] > a["t"] and b["samples"] >= a["samples"]:
                    total[int(b["t"])] += (b["samples"] - a["samples"]) / (b["t"] - a["t"])
        lines.append(Line(node, sorted((float(t), v) for t, v in total.items())))
    return [line for line in lines if line.points]


def value_names(series: list[RankSeries]) -> list[str]:
    """The named values to draw: the loss first, then the others in the order first seen (bounded)."""
    names: dict[str, None] = {}
    for one in series:
        for point in one.read.points:
            names.update(dict.fromkeys(point.get("v", {})))
    ordered = ["loss"] * ("loss" in names) + [n for n in names if n != "loss"]
    return ordered[: MAX_VALUE_CHARTS + 1]


def value_lines(series: list[RankSeries], name: str) -> list[Line]:
    """One line per attempt over the step: the lowest rank's value (every DDP rank logs the same, or its own)."""
    first: dict[int, RankSeries] = {}
    for one in series:
        first.setdefault(one.attempt, one)
    lines = []
    for attempt, one in sorted(first.items()):
        points = [(float(p["step"]), p["v"][name]) for p in one.read.points if name in p.get("v", {})]
        lines.append(Line(f"attempt {attempt}", points))
    return [line for line in lines if line.points]


def resume_marks(past: RunHistory) -> list[Mark]:
    return [
        Mark(float(r.step), f"attempt {number} resumed at step {r.step}")
        for number, this in past.attempts.items()
        if (r := this.resume) is not None and r.step is not None
    ]


def busy_rows(series: list[RankSeries]) -> list[tuple[str, float, float]]:
    """Per rank of the newest attempt with data: the median busy time and the median wait, a step."""
    newest = max((one.attempt for one in series if one.read.points), default=None)
    rows = []
    for one in series:
        pairs = [(p["busy_s"], p["step_s"]) for p in one.read.points if "busy_s" in p and "step_s" in p]
        if one.attempt == newest and pairs:
            busy = statistics.median(b for b, _ in pairs)
            wait = statistics.median(max(0.0, s - b) for b, s in pairs)
            rows.append((f"rank {one.rank} {one.node}", busy, wait))
    return rows
