"""A rank log's write times, read incrementally from its `.times` sidecar (format: ddpctl.run.logtimes).

`Stamps.split` cuts newly read log bytes at the recorded write boundaries and hands each piece to the log's line
splitter, so every complete line gets the time of the write that completed it. Bytes past the last record are
held back until their record arrives (the stamper writes it right after the bytes) unless the caller reads
`final`ly (the writers are gone: a stamper killed between the two writes leaves bytes no record covers).
"""

from __future__ import annotations

import os
from collections import deque

from ddpctl import safeio
from ddpctl.logs.core import LineSplitter
from ddpctl.run import logtimes

Group = tuple[float | None, list[str]]  # lines written at one time (None: not known, the log has no sidecar)
READ_LIMIT = 1 << 20


class Stamps:
    def __init__(self, log_path: str) -> None:
        self.path = logtimes.times_of(log_path)
        self.present: bool | None = None  # None: not looked yet; False: a log without times (older runs)
        self.indexed = 0  # log bytes the records cover
        self.last: float | None = None  # the newest time handed out
        self._offset = 0  # sidecar bytes consumed
        self._records: deque[tuple[int, float]] = deque()

    def reset(self) -> None:
        """The log restarted (truncated or replaced): so did its sidecar."""
        self.present, self.indexed, self._offset = None, 0, 0
        self._records.clear()

    def refresh(self, log_size: int) -> int | None:
        """Read new records; return how far into the log times are known, or None for a log without times.

        Whether there are times is decided once the log has bytes: the stamper creates the sidecar before it
        writes any, so a log with bytes and no sidecar was written without one.
        """
        if self.present is False or log_size == 0:
            return None if self.present is False else self.indexed
        try:
            fd = safeio.open_read(self.path)
        except OSError:  # missing, or a symlink (never followed): no times
            if self.present is None:
                self.present = False
            return None if self.present is False else self.indexed
        try:
            while data := os.pread(fd, READ_LIMIT, self._offset):
                records, used = logtimes.parse_times(data)
                self._offset += used
                self._records.extend(records)
                if records:
                    self.indexed = max(self.indexed, records[-1][0])
                if used < len(data) or used == 0:
                    break
        finally:
            os.close(fd)
        self.present = True
        return self.indexed

    def split(self, start: int, data: bytes, splitter: LineSplitter) -> list[Group]:
        """Lines of `data` (the log's bytes from offset `start`) grouped by the write that completed them."""
        groups: list[Group] = []
        pos = 0
        records = self._records
        while records and pos < len(data):
            end, when = records[0]
            cut = end - start
            if cut <= pos:
                records.popleft()
                continue
            take = min(cut, len(data))
            lines = splitter.feed(data[pos:take])
            if lines:
                groups.append((when, lines))
            pos = take
            if cut > len(data):
                break
            records.popleft()
            self.last = when
        if pos < len(data):
            lines = splitter.feed(data[pos:])
            if lines:
                groups.append((self.last, lines))
        return groups
