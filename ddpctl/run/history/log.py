"""events.jsonl on disk: appended one whole line per write, read by each process once and then only as it grows.

Each event is written with one O_APPEND write, so concurrent writers (batch shell, launchers on several nodes
sharing the filesystem, rank 0) never interleave inside a line. A process keeps what it has read of a run's log
(`log_of`): the next question (a decision, `logs -f`'s state poll every 2 s) reads only the bytes appended since,
and a log that was replaced or rewritten (another inode, a shorter file, other bytes before the offset) is read
again from its start. Reads are bounded: a torn, garbled, unknown or overlong line is skipped, never fatal, and
at most MAX_LOG_BYTES of a log are read at all.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

from ddpctl import safeio
from ddpctl.run.history.base import E, Event
from ddpctl.run.history.catalog import parse_event
from ddpctl.run.history.runhistory import RunHistory

MAX_LOG_BYTES = 1 << 28  # no real run writes this much; a hostile one must not make a status read it all
MAX_LINE_BYTES = 1 << 22  # a hang event of a 4096-rank job is ~0.5 MiB
LOG_CHUNK = 1 << 22
CHECK_BYTES = 256  # re-read before the offset: does the file still hold what was read?
KEPT_LOGS = 16  # runs whose logs a process keeps (`ddpctl list` asks about many runs once each)


def append(path: Path, event: E) -> E:
    """Write `event` as one line (dated now unless it carries its time); returns it as written."""
    if event.t is None:
        event = replace(event, t=round(time.time(), 3))
    line = (json.dumps(event.as_json(), sort_keys=True, default=str) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = safeio.open_append(path)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return event


def parse_line(line: bytes) -> Event | None:
    if len(line) > MAX_LINE_BYTES:
        return None
    try:
        return parse_event(json.loads(line.decode("utf-8", errors="replace")))
    except (ValueError, RecursionError):
        return None


class EventLog:
    """One run's events.jsonl as this process has read it so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.reads = 0  # times the file was opened and read: one per question asked of the run
        self.bytes_read = 0  # of the log's lines (each byte once, but for a last line still being written)
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, ident: tuple[int, int] | None) -> None:
        self._ident, self._offset, self._check = ident, 0, b""
        self._events: list[Event] = []
        self._skipping = False  # inside an overlong line

    def history(self) -> RunHistory:
        """The run's history now: the events read before plus those appended since (a missing file: none)."""
        with self._lock:
            self.reads += 1
            try:
                fd = safeio.open_read(self.path)
            except FileNotFoundError:
                self._reset(None)
                return RunHistory(())
            try:
                tail = self._read_new(fd)
            finally:
                os.close(fd)
            last = parse_line(tail) if tail.strip() else None  # a line still being written, or a torn one
            return RunHistory((*self._events, *([last] if last is not None else [])))

    def _read_new(self, fd: int) -> bytes:
        """Parse the complete lines appended since the last read; returns the incomplete rest (not consumed)."""
        info = os.fstat(fd)
        ident = (info.st_dev, info.st_ino)
        size = min(info.st_size, MAX_LOG_BYTES)
        if ident != self._ident or size < self._offset or self._rewritten(fd):
            self._reset(ident)
        pos, rest = self._offset, b""
        while pos < size:
            chunk = os.pread(fd, min(LOG_CHUNK, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            self.bytes_read += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                self._consume(line)
            if len(rest) > MAX_LINE_BYTES:  # not ours: skip it to its end, without holding it
                self._offset, rest, self._skipping = self._offset + len(rest), b"", True
        start = max(0, self._offset - CHECK_BYTES)
        self._check = os.pread(fd, self._offset - start, start)
        return b"" if self._skipping else rest

    def _consume(self, line: bytes) -> None:
        self._offset += len(line) + 1
        if self._skipping:
            self._skipping = False
            return
        event = parse_line(line)
        if event is not None:
            self._events.append(event)

    def _rewritten(self, fd: int) -> bool:
        start = max(0, self._offset - CHECK_BYTES)
        return os.pread(fd, self._offset - start, start) != self._check


_LOGS: OrderedDict[str, EventLog] = OrderedDict()
_LOGS_LOCK = threading.Lock()


def log_of(path: Path) -> EventLog:
    """This process's reader of the log at `path` (kept for the KEPT_LOGS runs asked about last)."""
    key = str(path.absolute())
    with _LOGS_LOCK:
        log = _LOGS.pop(key, None) or EventLog(Path(key))
        _LOGS[key] = log
        while len(_LOGS) > KEPT_LOGS:
            _LOGS.popitem(last=False)
        return log


def load(path: Path) -> RunHistory:
    """The run's history from its events.jsonl (read once per question; only appended bytes after the first)."""
    return log_of(path).history()
