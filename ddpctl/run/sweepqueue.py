"""The local backend's sweep queue, its decisions (pure): which tasks to start now, whether the queue is done,
and what an unstarted task's state is. The detached queue process that acts on them is
ddpctl.backends.local.sweep.

A task is seen as one of four words: `waiting` (not started, not cancelled), `running` (its supervisor or a
node still holds its lock), `ended` (started and over, whatever its end), `cancelled` (cancelled before it
started: it never will).
"""

from __future__ import annotations

from collections.abc import Sequence

WAITING = "waiting"
RUNNING = "running"
ENDED = "ended"
CANCELLED = "cancelled"

LOCAL_MAX_POINTS = 100  # points per sweep on the local backend: each is a full run on this one machine
LOCAL_DEFAULT_PARALLEL = 1  # one machine: one task at a time unless --max-parallel says more


def to_start(views: Sequence[str], max_parallel: int | None) -> list[int]:
    """The indexes of the tasks to start now: the lowest waiting ones, as many as the free slots (max_parallel
    less the running tasks; None: the local default, 1)."""
    limit = LOCAL_DEFAULT_PARALLEL if max_parallel is None else max(1, max_parallel)
    free = limit - sum(1 for view in views if view == RUNNING)
    waiting = [index for index, view in enumerate(views) if view == WAITING]
    return waiting[: max(0, free)]


def done(views: Sequence[str]) -> bool:
    """The queue has nothing left to do once no task waits (the running ones end by themselves)."""
    return WAITING not in views


def unstarted_state(cancelled: bool, queue_alive: bool) -> tuple[str, str]:
    """A task the queue has not started: (state, why). A task that waits for a queue which is gone (killed, or
    the machine rebooted) will never start: FAILED, saying so, not PENDING forever."""
    if cancelled:
        return "CANCELLED", "never started: cancelled before its turn"
    if queue_alive:
        return "PENDING", "waiting for a free slot in the sweep's queue"
    return "FAILED", "never started: the sweep's queue process is gone (killed?); submit the sweep again"
