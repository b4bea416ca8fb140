"""The one reader of an attempt's marker files for the requeue decision: it turns them into the events they stand
for, so the decision reads the run's truth from its events alone.

The node side writes a marker before its event: rank 0's `stopped.json` (then `stop`), the watchdog's `hang.json`
(claimed by the node that records the `hang`), a launcher's `node-lost.json` (claimed by the node that records the
`node-lost`). The markers stay, since the batch shell and the live nodes test them cheaply; a writer that died
between its marker and its event leaves a marker alone, and this reader appends the event it stands for (from
what the marker holds) before the decision reads the history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run import history
from ddpctl.run.history import Event, Hung, NodeLost, RunHistory, Stopped
from ddpctl.run.layout import RunLayout


def with_markers(layout: RunLayout, attempt: int, past: RunHistory) -> RunHistory:
    """`past` (the run's history as the caller read it) with the events of `attempt`'s markers that it lacks,
    each appended to the run's events as it is found."""
    this = past.attempt(attempt)
    found: list[Event] = []
    if this.first(Stopped) is None and (stopped := read(layout.stopped_marker(attempt))) is not None:
        found.append(stop_event(stopped, attempt))
    if this.first(Hung) is None and (hang := read(layout.hang_marker(attempt))) is not None:
        found.append(Hung(t=number(hang.get("t")), attempt=attempt, idle_s=number(hang.get("idle_s"))))
    if this.first(NodeLost) is None and (lost := read(layout.node_lost_marker(attempt))) is not None:
        found.append(lost_event(lost, attempt))
    added = [history.append(layout.events, event) for event in found]
    return RunHistory((*past.events, *added)) if added else past


def read(path: Path) -> dict[str, Any] | None:
    """A marker's record: {} for one that exists but holds no JSON object (its existence is the fact)."""
    if not path.exists():
        return None
    data = safeio.read_json(path)
    return data if isinstance(data, dict) else {}


def number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def stop_event(record: dict[str, Any], attempt: int) -> Stopped:
    try:
        return Stopped.from_marker({**record, "attempt": attempt, "t": number(record.get("time"))})
    except (TypeError, ValueError):  # a record its writer did not finish: the stop itself is the fact
        return Stopped(attempt=attempt)


def lost_event(record: dict[str, Any], attempt: int) -> NodeLost:
    node, rank, by = record.get("node"), record.get("node_rank"), record.get("by")
    return NodeLost(
        t=number(record.get("t")),
        attempt=attempt,
        node=node if isinstance(node, str) else None,
        node_rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        why=str(record.get("why") or ""),
        found_by=by if isinstance(by, str) else None,
    )
