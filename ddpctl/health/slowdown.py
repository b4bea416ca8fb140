"""Slowdown verdict (pure): a node whose step time stays well above its own earlier pace, or the run's, for minutes.

The straggler rule (health.straggler) compares one rank's busy time with the other ranks' now, at 2x over 20
steps; it misses a node that slows down gradually or by less, for minutes (a GPU that throttles when hot, a
neighbour's job on shared links, a failing disk for the data loader). This rule watches each node's pace over
time: at each look, a node's value is the median over its ranks of the busy time a step (the time not spent
waiting for the others inside DDP; the step time where busy is not measured), from the progress records. Its own
pace is the median of its values over its first BASELINE_S of steady training. A node is slow at a look when its
value is at least MIN_EXCESS_S and FACTOR x above its own pace (and, with other nodes, FACTOR x above how far the
others moved from theirs: a run that slows everywhere, a longer sequence length say, is no node's slowdown) or
above FACTOR x the other nodes' median now. Slow at every look for SUSTAIN_S makes a `slowdown`, once per node
and attempt. It is never fatal: nothing here ends or requeues a run.

A false alarm costs as much as a miss, so only steady training counts: a rank within WARMUP_S of its heartbeat's
start (an attempt's start, a resume after a requeue, a torchrun restart: data loaders, compilation, caches) or
SETTLE_S of the end of a declared pause, a rank in a pause or not training, and a silent record are left out, and
a node unseen for more than MAX_GAP_S starts its slow streak over.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Slowdowns are about minutes, not seconds: steps in the first minutes are slow for reasons of their own.
WARMUP_S = 300.0
# After a declared pause (an evaluation) the step-time window still holds steps from around it.
SETTLE_S = 60.0
# The node's own pace: long enough that one odd batch or one save does not set it.
BASELINE_S = 120.0
# "Well above": 1.5x. Steady DDP steps vary by a few percent; data-dependent ones (variable lengths) by far
# less than half once a window's median is taken.
FACTOR = 1.5
# Fast steps: a millisecond model's jitter is not a slowdown, whatever the ratio.
MIN_EXCESS_S = 0.05
# "For minutes": a checkpoint save, a GC pause or an undeclared evaluation is over long before this.
SUSTAIN_S = 300.0
# A node not seen this long (paused, silent, its records stale) starts its slow streak over.
MAX_GAP_S = 30.0
SILENT_S = 20.0  # a record not rewritten this long is a silent rank's (health.watchdog.SILENT_S), not a pace
MIN_WINDOW = 5  # steps in a record's median before its value counts


@dataclass(frozen=True)
class Slowdown:
    node: str
    step_s: float  # the node's busy (or step) time a step now
    baseline_s: float | None  # its own earlier pace
    run_s: float | None  # the other nodes' median now (None: no other node)
    versus: str  # "its own earlier pace" or "the other nodes"
    sustained_s: float

    @property
    def factor(self) -> float:
        against = self.baseline_s if self.versus == OWN else self.run_s
        return self.step_s / against if against else math.inf


OWN, RUN = "its own earlier pace", "the other nodes"


@dataclass
class _Node:
    early: list[float] = field(default_factory=list)  # values while the baseline is being taken
    early_since: float | None = None
    baseline: float | None = None
    slow_since: float | None = None
    seen: float | None = None


def node_values(now: float, records: Mapping[int, Mapping[str, Any]]) -> dict[str, float]:
    """Per node, the median busy (else step) time a step of its ranks in steady training (see the docstring)."""
    by_node: dict[str, list[float]] = {}
    for record in records.values():
        value = _num(record.get("busy_s"))
        value = value if value is not None else _num(record.get("step_s"))
        if value is not None and _steady(now, record):
            by_node.setdefault(str(record.get("node", "?")), []).append(value)
    return {node: statistics.median(values) for node, values in by_node.items()}


def _steady(now: float, record: Mapping[str, Any]) -> bool:
    if record.get("phase") != "train" or record.get("pause") is not None:
        return False
    window, written = record.get("window"), _num(record.get("written"))
    if not isinstance(window, int) or window < MIN_WINDOW or (written is not None and now - written > SILENT_S):
        return False
    started, resumed = _num(record.get("started")), _num(record.get("resumed"))
    if started is None or now - started < WARMUP_S:
        return False
    return not (resumed is not None and now - resumed < SETTLE_S)


def _num(value: Any) -> float | None:
    """A finite number >= 0 from a record (ranks write them: anything else is left out), or None."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


class SlowdownRule:
    """Fed every look at the records (the watchdog's poll); returns the slowdowns found at this look, each node
    once. State is a few numbers per node: the baseline's values are kept only while it is being taken."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.told: set[str] = set()
        self._look: tuple[Mapping[str, float], list[float], list[float]] | None = None

    def look(self, now: float, records: Mapping[int, Mapping[str, Any]]) -> list[Slowdown]:
        values = node_values(now, records)
        for node, value in values.items():
            self._learn(self.nodes.setdefault(node, _Node()), now, value)
        found = []
        for node, value in sorted(values.items()):
            state = self.nodes[node]
            verdict = self._slow(node, value, values)
            if verdict is None:
                state.slow_since = None
                continue
            state.slow_since = now if state.slow_since is None else state.slow_since
            if now - state.slow_since >= SUSTAIN_S and node not in self.told:
                self.told.add(node)
                found.append(Slowdown(node, value, state.baseline, verdict[1], verdict[0], now - state.slow_since))
        return found

    def _learn(self, state: _Node, now: float, value: float) -> None:
        if state.seen is not None and now - state.seen > MAX_GAP_S:
            state.slow_since = None
        state.seen = now
        if state.baseline is None:
            state.early_since = now if state.early_since is None else state.early_since
            state.early.append(value)
            if now - state.early_since >= BASELINE_S:
                state.baseline, state.early = statistics.median(state.early), []

    def _slow(self, node: str, value: float, values: Mapping[str, float]) -> tuple[str, float | None] | None:
        """Why `node` is slow at this look (OWN or RUN, and the others' median), or None."""
        ordered, ratios = self._ordered(values)
        run = median_without(ordered, value)
        base = self.nodes[node].baseline
        moved = median_without(ratios, value / base) if base else (statistics.median(ratios) if ratios else None)
        if base and value - base >= MIN_EXCESS_S and value > FACTOR * base * max(1.0, moved or 1.0):
            return OWN, run
        if run and value - run >= MIN_EXCESS_S and value > FACTOR * run:
            return RUN, run
        return None

    def _ordered(self, values: Mapping[str, float]) -> tuple[list[float], list[float]]:
        """This look's values and ratios to their baselines, sorted (once a look: the medians without one node
        are then read by index, so a look costs O(n log n) in the nodes, not n squared)."""
        if self._look is None or self._look[0] is not values:
            ratios = sorted(v / b for n, v in values.items() if (b := self.nodes[n].baseline))
            self._look = (values, sorted(values.values()), ratios)
        return self._look[1], self._look[2]


def median_without(ordered: list[float], value: float) -> float | None:
    """The median of sorted `ordered` with one occurrence of `value` left out (None when nothing is left)."""
    skip, size = bisect.bisect_left(ordered, value), len(ordered) - 1
    if size <= 0:
        return None

    def at(k: int) -> float:
        return ordered[k] if k < skip else ordered[k + 1]

    return at(size // 2) if size % 2 else (at(size // 2 - 1) + at(size // 2)) / 2
