"""What `ddpctl logs -f` does when it cannot keep up with the writers: a bounded ordering window and skipping ahead.

A follower of many busy ranks can fall behind: Python pays ~1-2 µs a line, `tail -F` ~0.4, and on a shared
machine the writers take the CPU it would need. Reading everything in order then shows lines later and later
(seconds, then minutes), which is no use to someone watching a job. So the follower bounds its lag instead:

  * ordering window (`WINDOW_S`): lines are shown in write-time order within this window: a line may come
    after a newer one of another rank by at most this much (so a pass need not wait for the next to show what
    it read), and no line waits longer than this for a rank that is behind (whose lines are then shown when
    read, out of order by more than the window);
  * skipping ahead (`SKIP_AFTER_S`): bytes of a rank log the follower has known about for longer than this
    without showing them are passed over (up to a whole line), and one visible line says how many lines and
    bytes of which ranks were skipped. Nothing is lost on disk: the rank files keep everything, and
    `ddpctl logs JOB` without -f reads them. A line read is shown at the end of the pass that read it, so its
    age is the bound plus (at most) a cycle of the follower; where cycles are long (a loaded machine) the
    bound shrinks (`skip_bound`, down to `SKIP_MIN_S`), which makes the passes shorter too (less to read).

  * only when outrun (`SKIP_MIN_BACKLOG`): nothing is skipped in a pass after one that took in less than this
    across the files: a short stall of the follower on a loaded machine delays a few lines, it never drops them.

  * showing as the pass goes (`SHOW_EVERY_S`): a pass that runs longer than this (a follower short of CPU
    takes seconds over 512 busy files) shows what it has read so far every `SHOW_EVERY_S`, each batch in
    write-time order, instead of holding all of it until the pass ends; a line of a file read later in the
    pass can then follow a newer one by up to the time of the pass.

When the follower saw bytes is known only at each pass (an `lstat` per file): bytes that appeared between two
passes are taken as having arrived evenly between the two (`seen_by`). A pass after the follower rested (the
last one read nothing) skips nothing: what came while it waited is not something it fell behind on. Skipping
never happens when the writers are gone (the final drain reads everything) nor in the Python API's `Job.logs`,
whose reader sets the pace.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

WINDOW_S = 0.5  # the longest a line waits for an older one from a slower rank
SKIP_AFTER_S = 0.5  # bytes seen this long ago and still not shown are skipped
SKIP_MIN_S = 0.2  # ... or this long, where the follower's cycles are slow
LAG_TARGET_S = 1.0  # what the bound and a cycle may add up to (a shown line's age)
SHOW_EVERY_S = 0.25  # a pass that runs longer shows what it read this often
SKIP_BLOCK = 1 << 20  # skipped bytes are read (to count their lines) this much at a time
# Bytes a pass took in across the followed files (shown or skipped) below which the next pass skips nothing: a
# follower that is late because it was starved for a moment, not because the writers outrun it, has a few lines
# to catch up on, which cost nothing to read and may be the ones watched for (an error, the stop). A stream that
# outruns the follower brings far more to each pass (50,000 lines/s is ~3 MB/s).
SKIP_MIN_BACKLOG = 256 << 10

Seen = tuple[int, float, float]  # (file size, when a pass first saw it, when a pass last saw it so)


def seen_by(points: Sequence[Seen], cutoff: float) -> int:
    """How far into a file every byte had been seen at `cutoff`. `points`: (size, first, last) as passes saw the
    file, oldest first: it had `size` bytes from `first` to `last`; the bytes between two sizes are taken as
    having arrived evenly between the last time the file was seen at the one and the first at the other."""
    upto = points[0][0] if points and points[0][1] <= cutoff else 0
    for (size0, _, last0), (size1, first1, _) in itertools.pairwise(points):
        if first1 <= cutoff:
            upto = size1
            continue
        if last0 < cutoff:
            upto = size0 + int((size1 - size0) * (cutoff - last0) / (first1 - last0))
        break
    return upto


def skip_bound(most: float, cycle: float) -> float:
    """How long seen bytes may stay unshown before they are skipped, after a cycle (pass, release, pause) of
    `cycle` seconds: `most`, or less so that the bound and a cycle stay within LAG_TARGET_S, never under
    SKIP_MIN_S."""
    return min(most, max(SKIP_MIN_S, LAG_TARGET_S - cycle))


def release_mark(started: float, hold: float, window: float | None, held_back: Iterable[float]) -> float:
    """Lines written up to this time may be shown after a pass that began at `started`.

    Strictly (`window` None), only lines no rank can still better with an older one: every rank read in full
    was seen after `started`, so what it still holds was written after `started - hold`; a rank left with bytes
    unread (`held_back`: the last time shown of each) can still deliver lines from that time on. With a window,
    lines up to `window` newer than that go too (an older line that comes later is at most `window` older), and
    no line waits for a slow rank longer than `window` after the pass began (that rank's lines are then shown
    when read, out of order by more than the window)."""
    strict = min(min(held_back, default=started - hold), started - hold)
    return strict if window is None else max(strict + window, started - window)


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
        self.bound = SKIP_AFTER_S  # the bound of the latest skip, for the note

    def __bool__(self) -> bool:
        return bool(self.bytes)

    def add(self, rank: int, lines: int, size: int) -> None:
        self.lines[rank] = self.lines.get(rank, 0) + lines
        self.bytes[rank] = self.bytes.get(rank, 0) + size

    def note(self, job_id: str, attempt: int) -> str:
        lines, size, ranks = sum(self.lines.values()), sum(self.bytes.values()), rank_ranges(self.bytes)
        self.lines, self.bytes = {}, {}
        return (
            f"[ddpctl] -f fell behind the writers by more than {self.bound:g} s: skipped {lines:,} lines "
            f"({size:,} bytes) of rank{'s' if ',' in ranks or '-' in ranks else ''} {ranks} in attempt {attempt}; "
            f"they are in the rank files: `ddpctl logs {job_id} --attempt {attempt}` (without -f) shows them"
        )


@dataclass
class Pace:
    """How a follower's pass keeps up: bytes seen more than `after` s before a file is looked at (`clock`) are
    skipped and counted in `skipped`; when the pass runs longer than `every` s, what it read so far is shown
    (`show`) every `every` s, so a starved follower does not hold a whole pass's lines until it ends."""

    after: float
    skipped: Skipped
    clock: Callable[[], float]
    show: Callable[[], None]
    every: float = SHOW_EVERY_S
