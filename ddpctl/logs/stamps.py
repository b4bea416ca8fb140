"""A rank log's write times, read incrementally from its `.times` sidecar (format: ddpctl.run.logtimes).

`Stamps.split` cuts newly read log bytes at the recorded write boundaries and hands each piece to the log's line
splitter, so every complete line gets the time of the write that completed it. Bytes past the last record are
held back until their record arrives (the stamper writes it right after the bytes) unless the caller reads
`final`ly (the writers are gone: a stamper killed between the two writes leaves bytes no record covers).
"""

from __future__ import annotations

import bisect
import itertools
import os
import resource
from collections.abc import Callable
from typing import TypeVar

from ddpctl import safeio
from ddpctl.logs.core import LineSplitter, decoded
from ddpctl.run import logtimes

Group = tuple[float | None, list[str]]  # lines written at one time (None: not known, the log has no sidecar)
Timed = tuple[list[float | None], list[str]]  # lines and, for each, the time it was written (None: not known)
TimedRaw = tuple[list[float | None], list[bytes]]  # the same with the lines as read (a follower's: see LineSplitter)
L = TypeVar("L", str, bytes)
READ_LIMIT = 1 << 20


class _FdBudget:
    """Descriptors `logs` may keep open (logs and their sidecars): half the soft limit, so 1 024 ranks never
    run into a soft limit of 1 024; past it, files are opened and closed per read."""

    def __init__(self) -> None:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.left = 4096 if soft == resource.RLIM_INFINITY else max(0, soft // 2 - 32)

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def give(self) -> None:
        self.left += 1


FDS = _FdBudget()


class Stamps:
    def __init__(self, log_path: str) -> None:
        self.path = logtimes.times_of(log_path)
        self.present: bool | None = None  # None: not looked yet; False: a log without times (older runs)
        self.indexed = 0  # log bytes the records cover
        self.last: float | None = None  # the newest time handed out
        self._offset = 0  # sidecar bytes consumed
        # Records not used up yet, as two columns from index _head on (no tuple per record: see split_timed).
        self._ends: list[int] = []
        self._times: list[float] = []
        self._head = 0
        self._fd: int | None = None  # kept open within the budget: an open and a close less per file and poll

    def reset(self) -> None:
        """The log restarted (truncated or replaced): so did its sidecar."""
        self.close()
        self.present, self.indexed, self._offset = None, 0, 0
        self._ends, self._times, self._head = [], [], 0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            FDS.give()

    def refresh(self, log_size: int, skipped: int = 0) -> int | None:
        """Read new records; return how far into the log times are known, or None for a log without times.
        `skipped`: the log's bytes before it were passed over (ddpctl.logs.behind), their records need no parse.

        Whether there are times is decided once the log has bytes: the stamper creates the sidecar before it
        writes any, so a log with bytes and no sidecar was written without one.
        """
        if self.present is False or log_size == 0:
            return None if self.present is False else self.indexed
        fd = self._fd
        if fd is None:
            try:
                fd = safeio.open_read(self.path)
            except OSError:  # missing, or a symlink (never followed): no times
                if self.present is None:
                    self.present = False
                return None if self.present is False else self.indexed
            if FDS.take():
                self._fd = fd
        try:
            self._read(fd, skipped)
        finally:
            if self._fd is None:
                os.close(fd)
        self.present = True
        return self.indexed

    def _read(self, fd: int, skipped: int) -> None:
        while data := os.pread(fd, READ_LIMIT, self._offset):
            full = len(data)
            if skipped > self.indexed:
                data = self._pass_over(data, skipped)
            ends, times, used = logtimes.parse_columns(data)
            self._offset += used
            self._add(ends, times)
            if ends:
                self.indexed = max(self.indexed, ends[-1])
            # A short read reached the end: asking again would only return nothing (a syscall per file and poll).
            if used < len(data) or used == 0 or full < READ_LIMIT:
                break

    def _pass_over(self, data: bytes, offset: int) -> bytes:
        """`data` (records) after the record ending the log at `offset`, unparsed up to it, if there is one (the
        stamper writes a record per write, a line most often); else all of `data`, to be parsed."""
        key = b"%d " % offset
        at = 0 if data.startswith(key) else data.find(b"\n" + key) + 1
        end = data.find(b"\n", at) if at or data.startswith(key) else -1
        if end < 0:
            return data
        ends, times, _ = logtimes.parse_columns(data[at : end + 1])
        if ends != [offset]:
            return data
        self._offset += end + 1
        self._ends, self._times, self._head = [], [], 0  # every record read before ends before `offset`
        self.indexed, self.last = offset, times[0]
        return data[end + 1 :]

    def _add(self, ends: list[int], times: list[float]) -> None:
        if self._head:  # drop the used records first, so the columns stay as long as what is still to come
            del self._ends[: self._head], self._times[: self._head]
            self._head = 0
        self._ends += ends
        self._times += times

    def skip(self, offset: int) -> None:
        """The log's bytes before `offset` were passed over: so are their records."""
        head = bisect.bisect_right(self._ends, offset, lo=self._head)
        if head > self._head:
            self.last, self._head = self._times[head - 1], head

    def split(self, start: int, data: bytes, splitter: LineSplitter) -> list[Group]:
        """Lines of `data` (the log's bytes from offset `start`) grouped by the write that completed them."""
        return group(*self.split_timed(start, data, splitter.has_partial, splitter.feed, decoded))

    def split_timed(
        self,
        start: int,
        data: bytes,
        partial: bool,
        feed: Callable[[bytes], list[L]],
        whole: Callable[[list[bytes]], list[L]],
    ) -> tuple[list[float | None], list[L]]:
        """Lines of `data` (the log's bytes from offset `start`), each with the time of the write completing it.
        `feed` is the log's splitter's (`partial`: it holds the start of a line); where `data` is whole lines and
        the splitter holds nothing, they are split here once and handed to `whole` instead (bytes as they are, or
        decoded), as `feed` would have returned them."""
        aligned = None if partial else self._split_aligned(start, data)
        if aligned is not None:
            return aligned[0], whole(aligned[1])
        times: list[float | None] = []
        lines: list[L] = []
        pos, ends, head = 0, self._ends, self._head
        while head < len(ends) and pos < len(data):
            end, when = ends[head], self._times[head]
            cut = end - start
            if cut <= pos:
                head += 1
                continue
            take = min(cut, len(data))
            new = feed(data[pos:take])
            times += [when] * len(new)
            lines += new
            pos = take
            if cut > len(data):
                break
            head += 1
            self.last = when
        self._head = head
        if pos < len(data):
            new = feed(data[pos:])
            times += [self.last] * len(new)
            lines += new
        return times, lines

    def _split_aligned(self, start: int, data: bytes) -> tuple[list[float | None], list[bytes]] | None:
        """The common case, without a step per record: each of the next records ends one line of `data`, which
        ends with its last line (the writer prints a line per write): their times and the lines. None for
        anything else."""
        count = data.count(b"\n")
        if not count or data[-1] != 0x0A:
            return None
        ends, head = self._ends, self._head
        while head < len(ends) and ends[head] <= start:  # used up before this read (see split_timed)
            head += 1
        stop = head + count
        if stop > len(ends) or (stop < len(ends) and ends[stop] <= start + len(data)):
            return None
        lines = data[:-1].split(b"\n")
        line_ends = itertools.accumulate(map((1).__add__, map(len, lines)), initial=start)
        next(line_ends)
        if ends[head:stop] != list(line_ends):
            return None
        times: list[float | None] = list(self._times[head:stop])
        self._head = stop
        self.last = times[-1]
        return times, lines


def as_read(lines: list[bytes]) -> list[bytes]:
    """`Stamps.split_timed`'s `whole` for lines kept as bytes."""
    return lines


def group(times: list[float | None], lines: list[str]) -> list[Group]:
    """Timed lines as groups: consecutive lines with the same time together."""
    return [
        (when, [line for _, line in run]) for when, run in itertools.groupby(zip(times, lines, strict=True), _first)
    ]


def _first(pair: tuple[float | None, str]) -> float | None:
    return pair[0]
