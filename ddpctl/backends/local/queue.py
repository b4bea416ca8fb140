"""The state of a local sweep's task that its queue has not started yet, and its cancel before its turn: what
`status`, `list` and `cancel` ask of ddpctl.backends.local for a sweep's task (side effects: the decision
lock, a cancel's event). The queue process itself is ddpctl.backends.local.sweep.

A task is started once its supervisor's pid file exists (written under the sweep's decision lock as the queue
starts it) or its lock is held; before that its state is its queue's: PENDING while the queue lives, FAILED
("never started") once the queue is gone, CANCELLED after a cancel (ddpctl.run.sweepqueue.unstarted_state).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ddpctl import safeio
from ddpctl.backends.local import processes as local_proc
from ddpctl.run import history, sweepqueue
from ddpctl.run.history import Cancelled
from ddpctl.run.layout import RunLayout, sweep_dir
from ddpctl.run.registry import JobRecord

DECIDE = "queue.decide"
CANCELLED = "cancelled"  # in the sweep dir: the sweep was cancelled, no further task starts


def sweep_home(record: JobRecord) -> Path:
    return sweep_dir(Path(record.run_dir).parent, record.sweep or "")


@contextlib.contextmanager
def deciding(home: Path) -> Iterator[None]:
    """The sweep's decision lock: one start or cancel at a time."""
    fd = safeio.open_fd(home / DECIDE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def started(run_dir: Path) -> bool:
    """Its supervisor was started: the pid file is written, under the decision lock, as it starts."""
    return RunLayout(run_dir).supervisor_pid.exists() or local_proc.lock_held(run_dir)


def view(run_dir: Path) -> str:
    """The task as the queue sees it (ddpctl.run.sweepqueue's four words)."""
    if local_proc.lock_held(run_dir):
        return sweepqueue.RUNNING
    if started(run_dir):
        return sweepqueue.ENDED
    if history.load(RunLayout(run_dir).events).cancelled():
        return sweepqueue.CANCELLED
    return sweepqueue.WAITING


def unstarted_state(record: JobRecord) -> tuple[str, str] | None:
    """(state, why) of a task its queue has not started; None once it was started (its supervisor says)."""
    run_dir = Path(record.run_dir)
    if started(run_dir):
        return None
    home = sweep_home(record)
    cancelled = (home / CANCELLED).exists() or history.load(RunLayout(run_dir).events).cancelled()
    state = sweepqueue.unstarted_state(cancelled, local_proc.lock_held(home))
    # The queue may have started it between the two looks: its supervisor's state then.
    return None if started(run_dir) else state


def cancel_unstarted(record: JobRecord) -> bool:
    """Cancel a task before its turn (it never starts); False when it has been started (cancel it as a job)."""
    run_dir = Path(record.run_dir)
    with deciding(sweep_home(record)):
        if started(run_dir):
            return False
        if not history.load(RunLayout(run_dir).events).cancelled():
            history.append(RunLayout(run_dir).events, Cancelled(attempt=0))
        return True


def live(record: JobRecord) -> bool:
    """A local job runs while its run dir's lock is held; a sweep's task its queue has not started yet, while the
    queue is (its sweep dir's lock held)."""
    run_dir = Path(record.run_dir)
    if local_proc.lock_held(run_dir):
        return True
    return record.sweep is not None and not started(run_dir) and local_proc.lock_held(sweep_home(record))
