"""`ddpctl logs --tail N`: only the last N merged lines, with the attempt banner they belong under.

A sink in front of the real one: it keeps the last N lines (and the notes among them) and hands them on once the
whole selection has been read, so the merge order is the one `logs` shows without it."""

from __future__ import annotations

from collections import deque

from ddpctl.logs.core import Source
from ddpctl.logs.failures import ErrorHit
from ddpctl.logs.output import Sink

Entry = tuple[Source | None, str, float | None]  # (None, note, None) for a note


class TailSink:
    def __init__(self, sink: Sink, count: int) -> None:
        self.sink, self.count = sink, count
        self.kept: deque[Entry] = deque()
        self.lines_kept = 0
        self.banner: str | None = None  # the newest note that fell out in front of the kept lines

    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None:
        for line in lines:
            self.kept.append((source, line, when))
            self.lines_kept += 1
        while self.lines_kept > self.count and self.kept:
            dropped = self.kept.popleft()
            if dropped[0] is None:
                self.banner = dropped[1]
            else:
                self.lines_kept -= 1

    def note(self, text: str) -> None:
        self.kept.append((None, text, None))

    def failure(self, source: Source, hit: ErrorHit) -> None:
        self.sink.failure(source, hit)

    def flush(self) -> None:
        """Nothing yet: what is last is known only at the end (`finish`)."""

    def finish(self) -> None:
        if self.banner is not None and (not self.kept or self.kept[0][0] is not None):
            self.sink.note(self.banner)
        for source, text, when in self.kept:
            if source is None:
                self.sink.note(text)
            else:
                self.sink.lines(source, [text], when)
        self.sink.flush()
