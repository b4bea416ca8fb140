"""`ddpctl logs -f`: follow a job's rank logs across requeues until the job reaches a terminal state.

Polling design (works on NFS/Lustre, where inotify never hears about writes made on compute nodes):
  * each poll stats every followed file (`os.stat`, no open) and reads only files whose size changed;
  * the pause between polls adapts: 0.05 s after a poll that read something, doubling while idle up to 0.5 s,
    so a new line is printed within 0.5 s and an idle follower makes two passes a second (1 024 idle files:
    under 1 % of one core);
  * directories are listed again only when their mtime changes (a file or attempt was created), and every 5 s
    as a safety net for filesystems that cache directory attributes;
  * the job's state is asked for at most every 2 s (squeue is not free), never per line or per poll;
  * a follower that left bytes unread in a pass (past a file's chunk) starts the next one without pausing.
On a local filesystem (logs_notify decides) inotify events wake the follower instead: 0.025 s after a poll that
read something, at once on an event when idle; the state query still runs every 2 s, and a full pass over the
files every 10 s anyway, in case an event was lost.
With `window`/`skip_after` (the command's, not the Python API's) the lag is bounded: ddpctl.logs.behind.
When the state is terminal the follower moves to any newer attempt, reads every file to its end, prints
partial last lines (their writers are gone) and a closing banner naming the state.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from ddpctl.errors import CommandError
from ddpctl.logs.asker import Answer, Asker
from ddpctl.logs.behind import SKIP_MIN_BACKLOG, Pace, Skipped, release_mark, skip_bound
from ddpctl.logs.core import LineFilter, attempt_banner, end_banner
from ddpctl.logs.files import CHUNK, AttemptFiles, list_attempts
from ddpctl.logs.merge import HOLD_S, Merger
from ddpctl.logs.notify import Pacer
from ddpctl.logs.output import Sink
from ddpctl.run.layout import RunLayout
from ddpctl.run.state import JobState

# How long a state query may hold the reading loop: a squeue answers well within it; one that does not is left to
# answer on its thread while the lines go on.
ASK_WAIT_S = 0.5


@dataclass(frozen=True)
class FollowConfig:
    fast: float = 0.05  # pause after a poll that read something
    slow: float = 0.5  # longest pause while idle: the latency bound
    state_every: float = 2.0  # seconds between job-state queries
    rescan_every: float = 5.0  # forced directory listing, in case a directory mtime change was missed
    notify: bool = True  # use inotify wake-ups where the filesystem is local
    notified_gap: float = 0.025  # with inotify: pause after a poll that read something (batches a burst)
    notified_sweep: float = 10.0  # with inotify: a full pass this often even without events
    wall: Callable[[], float] = time.time  # the clock write times are compared with (a test sets its own)
    window: float | None = None  # the longest a line waits for an older one (None: as long as it takes)
    skip_after: float | None = None  # skip bytes seen this long ago and not shown yet (None: never skip)
    skip_backlog: int = SKIP_MIN_BACKLOG  # ... after a pass that left at least this many bytes unread
    chunk: int = CHUNK  # the most bytes one pass reads from one file


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns  # noqa: PTH116 - a str path, checked every poll
    except FileNotFoundError:
        return -1


DRAIN_LIMIT_S = 30.0  # a writer that outlived its job (a stray process) must not keep us draining forever


def drain(
    files: AttemptFiles, sink: Sink, flt: LineFilter, merger: Merger, *, final: bool, wall: Callable[[], float]
) -> None:
    """Read every file to its end; with `final` (the writers are gone), also the bytes with no recorded time
    and the partial last lines. Everything held for ordering is printed."""
    deadline = time.monotonic() + DRAIN_LIMIT_S
    for tail in files.tails.values():
        tail.final = tail.final or final
    started = wall()
    while poll_files(files, flt, merger, started) and time.monotonic() < deadline:
        merger.release(sink, watermark(files, started, None))
        sink.flush()
        started = wall()
    if final:
        flush_partials(files, flt, merger)
    merger.release(sink)
    sink.flush()


def flush_partials(files: AttemptFiles, flt: LineFilter, merger: Merger) -> None:
    for tail in files.tails.values():
        lines = tail.flush_raw()
        if lines and flt.grep is not None:
            lines = [line for line in lines if flt.grep.search(line.decode("utf-8", "replace"))]
        if lines:
            merger.add(tail.stamps.last or time.time(), tail.source, lines)


def poll_files(files: AttemptFiles, flt: LineFilter, merger: Merger, started: float, pace: Pace | None = None) -> bool:
    """One pass over the files, started at wall time `started`: their new lines (as read: bytes, decoded by the
    sink) into `merger`; True if any of them grew. `files.behind`: some file has more to read already. With
    `pace` (ddpctl.logs.behind.Pace), bytes seen too long before each file is looked at (its own time: a pass
    over 512 busy files can take seconds on a loaded machine) are skipped, and what was read is shown as the
    pass goes when it runs long."""
    active = behind = False
    now = started - HOLD_S  # lines of a log without times count as written when the pass began: they pass at once
    seen = cutoff = None
    shown = started
    for tail in files.tails.values():
        if pace is not None:
            cutoff = (seen := pace.clock()) - pace.after
            if seen - shown >= pace.every:
                pace.show()
                shown = seen
        timed = tail.poll_raw(None, seen, cutoff)
        if pace is not None and tail.skipped[1]:
            pace.skipped.add(tail.source.rank, *tail.skipped)
        if timed is None:
            continue
        active = True
        behind = behind or tail.behind
        times, lines = timed
        if lines and flt.grep is not None:
            search = flt.grep.search
            kept = [i for i, line in enumerate(lines) if search(line.decode("utf-8", "replace"))]
            times, lines = [times[i] for i in kept], [lines[i] for i in kept]
        if lines:
            merger.add_timed(times, tail.source, lines, now)
    files.behind = behind
    return active


def watermark(files: AttemptFiles | None, started: float, window: float | None) -> float:
    """Lines written up to this time can be printed: no followed file can still deliver an older one (or, with
    `window`, none older than that: ddpctl.logs.behind.release_mark).

    `started` is when the last pass over the files began, not the time now: a file read early in a pass may
    since have got a line older than those of files read later in it (a pass over 512 busy files takes longer
    than HOLD_S on a loaded machine); only what was written before the pass began is in for every file."""
    tails = files.tails.values() if files is not None else ()
    held = [tail.stamps.last for tail in tails if tail.unread and tail.stamps.last is not None]
    return release_mark(started, HOLD_S, window, held)


class Follower:
    def __init__(
        self,
        layout: RunLayout,
        job_id: str,
        flt: LineFilter,
        sink: Sink,
        query: Callable[[], JobState],
        *,
        attempt: int | None = None,
        pinned: bool = False,
        config: FollowConfig | None = None,
    ) -> None:
        self.layout, self.job_id, self.flt, self.sink, self.query = layout, job_id, flt, sink, query
        self.asker = Asker(query)
        self.config = config or FollowConfig()
        self.pinned = pinned
        self.files = AttemptFiles(layout, attempt, flt, self.config.chunk) if attempt is not None else None
        self.clock: Callable[[], float] = time.monotonic
        self.pacer = Pacer(
            self.config.fast, self.config.slow, self.config.notified_gap, self.config.notify, layout.root
        )
        if self.files is not None:
            self.pacer.watch(self.files.path)
        self._seen = {"root": -2, "attempt": -2}
        self._next_rescan = 0.0
        self._warned = ""
        self._waiting = ""
        self.merger = Merger()
        self._pass_started = self.config.wall()
        self.skipped = Skipped()
        self._rested = False  # the last cycle read nothing and paused (ddpctl.logs.behind: then nothing is skipped)
        self._backlog = 0  # bytes the last pass took in (ddpctl.logs.behind.SKIP_MIN_BACKLOG)

    def run(self) -> JobState:
        try:
            next_state = next_sweep = self.clock()
            changed = True
            while True:
                active = False
                if changed or self.clock() >= next_sweep:
                    next_sweep = self.clock() + self.config.notified_sweep
                    active = self._step()
                self._show(watermark(self.files, self._pass_started, self.config.window))
                answer = None
                if self.clock() >= next_state:
                    next_state = self.clock() + self.config.state_every
                    answer = self.asker.ask(ASK_WAIT_S)
                answer = answer or self.asker.take()
                if answer is not None:
                    state = self._answered(answer)
                    if state is not None and state.terminal:
                        return self._finish(state)
                    self._note_waiting(state)
                # Lines held for ordering are due within HOLD_S: poll again soon rather than wait for an event; a
                # follower behind its files reads on at once.
                behind = self.files is not None and self.files.behind
                self._rested = not (behind or active or self.merger)
                changed = behind or self.pacer.pause(not self._rested, next_state - self.clock())
        finally:
            self.pacer.close()
            if self.files is not None:
                self.files.close()

    def _step(self) -> bool:
        now = self.clock()
        forced = now >= self._next_rescan
        if forced:
            self._next_rescan = now + self.config.rescan_every
        if not self.pinned and self._changed("root", str(self.layout.root), forced):
            self._advance()
        if self.files is None:
            return False
        if self._changed("attempt", str(self.files.path), forced):
            self.files.rescan()
        started, self._pass_started = self._pass_started, self.config.wall()
        pace = None
        if self.config.skip_after is not None:  # bounded by how long the last cycle took
            self.skipped.bound = skip_bound(self.config.skip_after, self._pass_started - started)
            # After a rest the sizes are still noted, but nothing is behind: the bound is endless for this pass.
            calm = self._rested or self._backlog < self.config.skip_backlog
            pace = Pace(math.inf if calm else self.skipped.bound, self.skipped, self.config.wall, self._show)
        before = sum(tail.offset for tail in self.files.tails.values())
        active = poll_files(self.files, self.flt, self.merger, self._pass_started, pace)
        # What the pass took in, shown or skipped: a stream, or a trickle a moment's starvation delayed.
        self._backlog = sum(tail.offset for tail in self.files.tails.values()) - before
        return active

    def _show(self, upto: float | None = None) -> None:
        """Lines written up to `upto` (all read so far for None), and a note of what was skipped."""
        self.merger.release(self.sink, upto)
        if self.skipped and self.files is not None:
            self.sink.note(self.skipped.note(self.job_id, self.files.attempt))
        self.sink.flush()

    def _changed(self, key: str, path: str, forced: bool) -> bool:
        mtime = _mtime_ns(path)
        changed = mtime != self._seen[key]
        self._seen[key] = mtime
        return changed or forced

    def _advance(self) -> None:
        """Move on to each newer attempt in turn (the job was requeued), finishing the current one first."""
        current = self.files.attempt if self.files is not None else -1
        for attempt in (n for n in list_attempts(self.layout.root) if n > current):
            if self.files is not None:
                drain(self.files, self.sink, self.flt, self.merger, final=True, wall=self.config.wall)
                self.files.close()
                self.sink.note(attempt_banner(attempt))
            self.files = AttemptFiles(self.layout, attempt, self.flt, self.config.chunk)
            self.pacer.watch(self.files.path)
            self._seen["attempt"] = _mtime_ns(str(self.files.path))  # before listing: a later file changes it
            self.files.rescan()

    def _finish(self, state: JobState) -> JobState:
        if not self.pinned:
            self._advance()
        if self.files is not None:
            self.files.rescan()
            drain(self.files, self.sink, self.flt, self.merger, final=True, wall=self.config.wall)
        self.sink.note(end_banner(self.job_id, state.state))
        self.sink.flush()
        return state

    def _note_waiting(self, state: JobState | None) -> None:
        """A job waiting in the queue says why (Resources, PartitionNodeLimit, BeginTime ...), once per reason."""
        waiting = state is not None and state.state in ("PENDING", "REQUEUED") and bool(state.reason)
        text = f"-- job {self.job_id} {state.state} ({state.reason}) --" if state is not None and waiting else ""
        if text and text != self._waiting:
            self.sink.note(text)
            self.sink.flush()
        self._waiting = text

    def _answered(self, answer: Answer) -> JobState | None:
        """The job's state; a failing scheduler query (squeue hiccup) is reported once and retried later."""
        state, err = answer
        if err is not None and not isinstance(err, CommandError):
            raise err
        if state is not None and state.state == "UNREACHABLE":
            err, state = CommandError(state.reason), None
        if err is not None:
            if str(err) != self._warned:
                self._warned = str(err)
                print(f"ddpctl: warning: no job state ({err}); still following", file=sys.stderr)
            return None
        return state
