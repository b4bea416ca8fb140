"""What `ddpctl logs -f` does when it cannot keep up with the writers: a bounded ordering window and skipping ahead.

A follower of many busy ranks can fall behind: Python pays ~1-2 µs a line, `tail -F` ~0.4, and on a shared
machine the writers take the CPU it would need. Reading everything in order then shows lines later and later
(seconds, then minutes), which is no use to someone watching a job. So the follower bounds its lag instead:

  * ordering window (`WINDOW_S`): a line is held back for an older one still to come from a slower rank at most
    this long; after it, it is shown even if a rank read later in the pass turns out to have older lines
    (those are shown when read, out of order by more than the window);
  * skipping ahead (`SKIP_AFTER_S`): bytes of a rank log the follower has known about for longer than this
    without showing them are passed over (up to a whole line), and one visible line says how many lines and
    bytes of which ranks were skipped. Nothing is lost on disk: the rank files keep everything, and
    `ddpctl logs JOB` without -f reads them.

When the follower saw bytes is known only at each pass (an `lstat` per file): bytes that appeared between two
passes are taken as having arrived evenly between the two (`seen_by`). Skipping never happens when the writers
are gone (the final drain reads everything) nor in the Python API's `Job.logs`, whose reader sets the pace.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

WINDOW_S = 0.5  # the longest a line waits for an older one from a slower rank
SKIP_AFTER_S = 0.5  # bytes seen this long ago and still not shown are skipped
SKIP_BLOCK = 1 << 20  # skipped bytes are read (to count their lines) this much at a time

Seen = tuple[int, float]  # (file size, when a pass saw it)


def seen_by(points: Sequence[Seen], cutoff: float) -> int:
    """How far into a file every byte had been seen at `cutoff`. `points`: (size, time) as passes saw the file,
    oldest first; the bytes between two of them are taken as having arrived evenly between their times."""
    upto = points[0][0] if points and points[0][1] <= cutoff else 0
    for (size0, time0), (size1, time1) in itertools.pairwise(points):
        if time1 <= cutoff:
            upto = size1
            continue
        if time0 < cutoff:
            upto = size0 + int((size1 - size0) * (cutoff - time0) / (time1 - time0))
        break
    return upto


def release_mark(started: float, hold: float, window: float | None, held_back: Iterable[float]) -> float:
    """Lines written up to this time may be shown after a pass that began at `started`: no rank can still
    deliver an older one (`held_back`: the last time shown of each rank with bytes left unread), except that no
    line waits longer than `window` for a slower rank (None: as long as it takes)."""
    mark = min(held_back, default=started - hold)
    mark = min(mark, started - hold)
    return mark if window is None else max(mark, min(started - hold, started - window))


def count_lines(read: Callable[[int, int], bytes], start: int, limit: int) -> tuple[int, int]:
    """Whole lines in a file's bytes from `start` to `limit` (`read(offset, size)`): their number and where the
    last of them ends (`start` if none ends before `limit`)."""
    lines, end, pos = 0, start, start
    while pos < limit:
        data = read(pos, min(SKIP_BLOCK, limit - pos))
        if not data:
            break
        lines += data.count(b"\n")
        if (cut := data.rfind(b"\n")) >= 0:
            end = pos + cut + 1
        pos += len(data)
    return lines, end


def rank_ranges(ranks: Iterable[int]) -> str:
    """0,1,2,5,7,8 -> '0-2,5,7-8'."""
    ordered = sorted(set(ranks))
    runs = []
    for _, run in itertools.groupby(enumerate(ordered), lambda pair: pair[1] - pair[0]):
        first, *rest = (rank for _, rank in run)
        runs.append(f"{first}-{rest[-1]}" if rest else str(first))
    return ",".join(runs)


class Skipped:
    """Lines and bytes skipped since the last note, per rank; `note` says so in one line and starts over."""

    def __init__(self) -> None:
        self.lines: dict[int, int] = {}
        self.bytes: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self.bytes)

    def add(self, rank: int, lines: int, size: int) -> None:
        self.lines[rank] = self.lines.get(rank, 0) + lines
        self.bytes[rank] = self.bytes.get(rank, 0) + size

    def note(self, job_id: str, attempt: int, bound: float) -> str:
        lines, size, ranks = sum(self.lines.values()), sum(self.bytes.values()), rank_ranges(self.bytes)
        self.lines, self.bytes = {}, {}
        return (
            f"[ddpctl] -f fell behind the writers by more than {bound:g} s: skipped {lines:,} lines "
            f"({size:,} bytes) of rank{'s' if ',' in ranks or '-' in ranks else ''} {ranks} in attempt {attempt}; "
            f"they are in the rank files: `ddpctl logs {job_id} --attempt {attempt}` (without -f) shows them"
        )
