"""The local sweep queue's decisions (ddpctl.run.sweepqueue): which tasks start now, when the queue is done, and
an unstarted task's state. Pure: literal tables."""

from __future__ import annotations

import pytest

from ddpctl.run.sweepqueue import done, to_start, unstarted_state

W, R, E, C = "waiting", "running", "ended", "cancelled"


@pytest.mark.parametrize(
    ("views", "max_parallel", "expected"),
    [
        ([W, W, W], None, [0]),  # local default: one at a time
        ([W, W, W], 1, [0]),
        ([R, W, W], 1, []),
        ([E, W, W], 1, [1]),
        ([E, R, W], 1, []),
        ([E, E, W], 1, [2]),
        ([C, W, W], 1, [1]),  # a task cancelled before its turn is skipped
        ([W, W, W], 2, [0, 1]),
        ([R, W, W, W], 2, [1]),
        ([R, R, W], 2, []),
        ([E, C, W, W], 3, [2, 3]),
        ([E, E, E], 1, []),
        ([R, R, W], 1, []),  # more running than the limit (never planned): none starts, none is stopped
        ([W, W], 0, [0]),  # a limit below 1 is 1 (the CLI refuses it; the queue still makes progress)
        ([], 1, []),
    ],
)
def test_to_start(views: list[str], max_parallel: int | None, expected: list[int]) -> None:
    assert to_start(views, max_parallel) == expected


@pytest.mark.parametrize(
    ("views", "expected"),
    [([W], False), ([R, W], False), ([R, E, C], True), ([E, E], True), ([], True)],
)
def test_done(views: list[str], expected: bool) -> None:
    assert done(views) is expected


@pytest.mark.parametrize(
    ("cancelled", "queue_alive", "state"),
    [(False, True, "PENDING"), (True, True, "CANCELLED"), (True, False, "CANCELLED"), (False, False, "FAILED")],
)
def test_unstarted_state(cancelled: bool, queue_alive: bool, state: str) -> None:
    assert unstarted_state(cancelled, queue_alive)[0] == state
