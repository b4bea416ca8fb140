"""`cancel` and `preempt` with the same answers on every backend.

Asked of a job that already ended, every backend says so in the same words with the same exit status (1), instead
of sbatch's silent success, the local backend's own wording, or scancel's raw error. `preempt` needs running
ranks: a pending or requeued job is told to wait. A failure of the command itself is named with the job.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ddpctl import exitcodes
from ddpctl.backends import current_state
from ddpctl.errors import CommandError, DdpctlError
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState, StateFn


class JobNotActive(DdpctlError):
    """The job cannot take this action in its state (ended, or not running yet for `preempt`)."""

    exit_code = exitcodes.FAILURE


def label(record: JobRecord) -> str:
    return f"job {record.job_id} ({record.name})"


def ended(record: JobRecord, state: JobState, action: str) -> JobNotActive:
    why = f" ({state.reason})" if state.reason and state.reason != "None" else ""
    return JobNotActive(f"{label(record)} already ended: {state.state}{why}; nothing to {action}")


def control(record: JobRecord, action: str, do: Callable[[], None], state_fn: StateFn = current_state) -> JobState:
    """Check the job's state, then run `do` (the backend's cancel or preempt); return the state it had."""
    state = state_fn(record)
    if state.terminal:
        raise ended(record, state, action)
    if action == "preempt" and state.state != "RUNNING":
        raise JobNotActive(
            f"{label(record)} is {state.state}: no rank runs yet, so there is nothing to preempt; "
            "try again once it is RUNNING"
        )
    try:
        do()
    except CommandError as err:
        after = state_fn(record)
        if after.terminal:  # it ended between the check and the command
            raise ended(record, after, action) from None
        raise CommandError(f"{action} {label(record)}: {err}") from None
    if action == "cancel":
        close_trackers([record])
    return state


COUNTDOWN_EVERY_S = 30.0  # a long wait says how long it may still take this often


def close_trackers(records: list[JobRecord]) -> None:
    """End the tracker runs of cancelled jobs (a sweep's tasks never started included), as ddpctl.node.batch
    ends a finished run's: a cancelled run never decides its own end. A run its script ended is left."""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.run.tracking import close_run

    for record in records:
        if (why := close_run(RunLayout(Path(record.run_dir)), "CANCELLED")) is not None:
            print(f"ddpctl: warning: {label(record)}: {why}", file=sys.stderr)


def wait_until_running(
    record: JobRecord,
    timeout_s: float,
    say: Callable[[str], None],
    *,
    state_fn: StateFn = current_state,
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
) -> JobState:
    """For `preempt` right after `submit`: wait (bounded) while the job is queued, saying why once per reason,
    with how long it may still wait, and that again every COUNTDOWN_EVERY_S (a countdown, not a repeated line)."""
    deadline, said, said_at = clock() + timeout_s, "", 0.0
    while True:
        state = state_fn(record)
        now = clock()
        if state.terminal or state.state == "RUNNING" or now >= deadline:
            return state
        text = f"waiting for {label(record)} to run: {state.state}" + (f" ({state.reason})" if state.reason else "")
        if text != said or now - said_at >= COUNTDOWN_EVERY_S:
            say(f"{text}; at most {deadline - now:.0f} s more (--wait)")
            said, said_at = text, now
        time.sleep(poll_s)
