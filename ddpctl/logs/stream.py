"""Rank output as an iterator of `LogLine`s (the Python API's `Job.logs`): `ddpctl logs` run on a thread, its
lines handed over through a bounded queue, so a huge log is yielded as it is read and a slow reader holds the
follower back instead of letting it buffer without end.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddpctl.run.registry import JobRecord
from ddpctl.run.state import StateFn

if TYPE_CHECKING:
    from ddpctl.logs.core import Source
    from ddpctl.logs.failures import ErrorHit
    from ddpctl.logs.show import LogsRequest


@dataclass(frozen=True)
class LogLine:
    """One whole line of one rank's output."""

    attempt: int
    node: str | None  # None until that rank's placement is known
    rank: int
    text: str
    time: float | None = None  # when the rank wrote it (Unix time); None for a log written without times


class _Stop(Exception):
    """The reader of a followed log went away: end the follower thread."""


QUEUE_LINES = 10_000  # lines read ahead of the reader at most: a slow reader holds the follower back


def _put(out: queue.Queue[object], item: object, stop: threading.Event) -> None:
    while True:
        try:
            out.put(item, timeout=0.1)
            return
        except queue.Full:
            if stop.is_set():
                raise _Stop from None


class _QueueSink:
    """A `ddpctl.logs.output.Sink` that hands lines to the iterator instead of writing them."""

    def __init__(self, out: queue.Queue[object], stop: threading.Event) -> None:
        self.out, self.stop = out, stop

    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None:
        if self.stop.is_set():
            raise _Stop
        for text in lines:
            _put(self.out, LogLine(source.attempt, source.node, source.rank, text, when or None), self.stop)

    def note(self, text: str) -> None:
        """Banners (`-- attempt 1 --`) are for people; the lines carry their attempt."""

    def failure(self, source: Source, hit: ErrorHit) -> None:
        """Not used: `logs()` has no errors mode."""

    def flush(self) -> None:
        if self.stop.is_set():
            raise _Stop


_DONE = object()


def stream_logs(record: JobRecord, request: LogsRequest, state_fn: StateFn) -> Iterator[LogLine]:
    from ddpctl.logs.show import job_state, show_logs

    out: queue.Queue[object] = queue.Queue(maxsize=QUEUE_LINES)
    stop = threading.Event()

    def produce() -> None:
        try:
            try:
                show_logs(record, request, _QueueSink(out, stop), state_fn=lambda rec: job_state(rec, state_fn))
            except _Stop:
                raise
            except BaseException as err:  # handed to the reader, raised there
                _put(out, err, stop)
            _put(out, _DONE, stop)
        except _Stop:
            pass

    # A thread even without `follow`, so a huge log is yielded as it is read rather than collected first.
    threading.Thread(target=produce, name="ddpctl-logs", daemon=True).start()
    try:
        while (item := out.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, LogLine)
            yield item
    finally:
        stop.set()
