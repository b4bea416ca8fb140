"""Several ranks' lines in the order they were written (each log's write times: stamps.Stamps).

A dump merges whole files (`merged`): each file's lines are already in time order, so a k-way merge needs only
one chunk per file in memory. A follower cannot know whether a rank it read up to now has written an older line
that is not in its file yet, so `Merger` holds lines back until no followed file can still deliver an older one:
a file read only in part (one chunk) delivers nothing older than what it delivered last, and a complete file
nothing older than `HOLD_S` ago (the stamper writes a line's time right after the line). Lines of a log without
times are taken as written when read.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator

from ddpctl.logs.core import LineFilter, Source
from ddpctl.logs.files import FileTail

HOLD_S = 0.1  # how long a line may be held back for an older one still on its way; adds to -f's latency
DUMP_CHUNK = 256 << 10  # per file: a dump of 1 024 rank logs holds 256 MiB at most
HeapEntry = tuple[float, int, int, Source, list[str]]  # time, rank, sequence (ties: file order), source, lines
Emit = Callable[[Source, list[str], float | None], None]


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
    def __init__(self) -> None:
        self._heap: list[HeapEntry] = []
        self._seq = itertools.count()

    def __bool__(self) -> bool:
        return bool(self._heap)

    def add(self, when: float, source: Source, lines: list[str]) -> None:
        heapq.heappush(self._heap, (when, source.rank, next(self._seq), source, lines))

    def release(self, emit: Emit, upto: float | None = None) -> None:
        """Emit every held group written at `upto` or before (all of them for None), oldest first."""
        heap = self._heap
        while heap and (upto is None or heap[0][0] <= upto):
            when, _, _, source, lines = heapq.heappop(heap)
            emit(source, lines, when)
