"""Several ranks' lines in the order they were written (each log's write times: stamps.Stamps).

A dump merges whole files (`merged`): each file's lines are already in time order, so a k-way merge needs only
one chunk per file in memory. A follower cannot know whether a rank it read up to now has written an older line
that is not in its file yet, so `Merger` holds lines back until no followed file can still deliver an older one:
a file read only in part (one chunk) delivers nothing older than what it delivered last, and a complete file
nothing older than `HOLD_S` ago (the stamper writes a line's time right after the line). Lines of a log without
times are taken as written when read.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ddpctl.logs.core import LineFilter, Source, decoded
from ddpctl.logs.files import FileTail

if TYPE_CHECKING:
    from ddpctl.logs.output import Sink

HOLD_S = 0.1  # how long a line may be held back for an older one still on its way; adds to -f's latency
DUMP_CHUNK = 256 << 10  # per file: a dump of 1 024 rank logs holds 256 MiB at most


def file_groups(
    tail: FileTail, flt: LineFilter, final: Callable[[], bool]
) -> Iterator[tuple[float, int, Source, list[str]]]:
    """One file's lines, grouped by write time; with `final()` (asked only when needed: a partial last line or
    bytes with no recorded time), also what only a writer that is gone leaves behind."""
    while True:
        while (groups := tail.poll_groups()) is not None:
            for when, lines in groups:
                if selected := flt.select(lines):
                    yield when or 0.0, tail.source.rank, tail.source, selected
        if tail.final or not (tail.unread or tail.has_partial) or not final():
            break
        tail.final = True
    if tail.final and (selected := flt.select(tail.flush())):
        yield tail.stamps.last or 0.0, tail.source.rank, tail.source, selected
    tail.close()


def merged(
    streams: Iterable[Iterator[tuple[float, int, Source, list[str]]]],
) -> Iterator[tuple[float, Source, list[str]]]:
    """The streams' groups by time, ties by rank (logs without times, all at 0.0: rank by rank, as before)."""
    for when, _, source, lines in heapq.merge(*streams, key=lambda g: (g[0], g[1])):
        yield when, source, lines


class Merger:
    """Lines held back for ordering, as columns of runs (time, rank, source, lines written at that time) sorted
    once per release: a follower of 512 busy ranks holds ~100k lines a second, each written at its own time,
    and a heap entry and a sink call per line were most of its time (benchmarks/README.md). A read whose lines
    share one time (a log without times, one write) is one run; otherwise each line is its own. Lines are held
    as read (bytes): a sink that writes bytes never decodes them (`emit_ordered`)."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._ranks: list[int] = []
        self._sources: list[Source] = []
        self._runs: list[Sequence[bytes]] = []

    def __bool__(self) -> bool:
        return bool(self._runs)

    def add(self, when: float, source: Source, lines: list[bytes]) -> None:
        self.add_timed([when] * len(lines), source, lines, when)

    def add_timed(self, times: list[float | None], source: Source, lines: list[bytes], unknown: float) -> None:
        """`lines` of `source`, each written at its time in `times`; `unknown` stands for a time not known."""
        if not lines:
            return
        if times.count(times[0]) == len(times):
            self._times.append(times[0] or unknown)
            self._ranks.append(source.rank)
            self._sources.append(source)
            self._runs.append(lines)
            return
        if not all(times):  # a None or 0.0 among them (falsy: no comparison per time)
            times = [when or unknown for when in times]
        self._times += times  # type: ignore[arg-type]  # no None left
        self._ranks += [source.rank] * len(lines)
        self._sources += [source] * len(lines)
        self._runs += zip(lines)  # one-line runs, without a Python step per line

    def release(self, sink: Sink, upto: float | None = None) -> None:
        """Emit every held line written at `upto` or before (all of them for None): oldest first, ties by rank,
        then in the order they were read."""
        times = self._times
        order = sorted(range(len(times)), key=self._ranks.__getitem__)  # stable: ties keep the order read
        order.sort(key=times.__getitem__)
        cut = len(order) if upto is None else bisect.bisect_right(order, upto, key=times.__getitem__)
        if not cut:
            return
        sources, runs = self._sources, self._runs
        if cut < len(order):  # keep the rest, in order: the next sort finds it sorted
            rest = order[cut:]
            self._times = list(map(times.__getitem__, rest))
            self._ranks = list(map(self._ranks.__getitem__, rest))
            self._sources = list(map(sources.__getitem__, rest))
            self._runs = list(map(runs.__getitem__, rest))
        else:
            self._times, self._ranks, self._sources, self._runs = [], [], [], []
        order = order[:cut]
        emit_ordered(
            sink,
            list(map(sources.__getitem__, order)),
            list(map(runs.__getitem__, order)),
            list(map(times.__getitem__, order)),
        )


def emit_ordered(sink: Sink, sources: list[Source], runs: list[Sequence[bytes]], times: list[float]) -> None:
    """Runs of lines (bytes, as read) in their final order into `sink`: all at once where it can take them so
    (`ordered`), else a `lines` call per run, decoded."""
    ordered = getattr(sink, "ordered", None)
    if ordered is not None:
        ordered(sources, runs, times)
        return
    for source, run, when in zip(sources, runs, times, strict=True):
        sink.lines(source, decoded(run), when)
