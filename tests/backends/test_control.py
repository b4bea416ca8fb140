"""cancel/preempt answers, the same whatever the backend: literal states through our own seam (state_fn, do)."""

from __future__ import annotations

import pytest

from ddpctl.backends.control import JobNotActive, control
from ddpctl.errors import CommandError
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState

RECORD = JobRecord(job_id="29", name="ex", run_dir="/nowhere", backend="sbatch", submitted_at=0.0)


def states(*seq: JobState):  # type: ignore[no-untyped-def]
    it = iter(seq)
    return lambda _record: next(it)


@pytest.mark.parametrize(
    ("action", "state", "message"),
    [
        (
            "cancel",
            JobState("COMPLETED", 0, "training completed"),
            "job 29 (ex) already ended: COMPLETED (training completed); nothing to cancel",
        ),
        ("preempt", JobState("CANCELLED", 1, "None"), "job 29 (ex) already ended: CANCELLED; nothing to preempt"),
        ("preempt", JobState("PENDING", 0, "Resources"), "job 29 (ex) is PENDING: no rank runs yet"),
        ("preempt", JobState("REQUEUED", 1), "job 29 (ex) is REQUEUED: no rank runs yet"),
    ],
)
def test_refused_with_exit_1(action: str, state: JobState, message: str) -> None:
    called = []
    with pytest.raises(JobNotActive) as err:
        control(RECORD, action, lambda: called.append(1), states(state))
    assert str(err.value).startswith(message) and err.value.exit_code == 1 and not called


def test_pending_job_can_be_cancelled() -> None:
    called = []
    control(RECORD, "cancel", lambda: called.append(1), states(JobState("PENDING")))
    assert called == [1]


def test_a_job_that_ends_during_the_command_is_reported_as_ended() -> None:
    def fail() -> None:
        raise CommandError("scancel: error: Kill job error on job id 29: Job/step already completing or completed")

    with pytest.raises(JobNotActive, match="already ended: COMPLETED; nothing to preempt"):
        control(RECORD, "preempt", fail, states(JobState("RUNNING"), JobState("COMPLETED")))
    with pytest.raises(CommandError, match=r"^preempt job 29 \(ex\): scancel: error"):
        control(RECORD, "preempt", fail, states(JobState("RUNNING"), JobState("RUNNING")))


def test_preempt_waits_for_a_queued_job_to_run_saying_why_once() -> None:
    from ddpctl.backends.control import wait_until_running

    said: list[str] = []
    seq = states(JobState("PENDING", reason="Resources"), JobState("PENDING", reason="Resources"), JobState("RUNNING"))
    got = wait_until_running(RECORD, 60, said.append, state_fn=seq, poll_s=0.0)
    assert got.state == "RUNNING" and said == [
        "waiting for job 29 (ex) to run: PENDING (Resources); at most 60 s more (--wait)"
    ]
    clock = iter([0.0, 0.0, 5.0])
    got = wait_until_running(
        RECORD, 1, said.append, state_fn=lambda _r: JobState("PENDING"), poll_s=0.0, clock=lambda: next(clock)
    )
    assert got.state == "PENDING"  # gave up: control() then says it is not running


def test_a_long_queue_wait_counts_down_instead_of_repeating() -> None:
    """Issue 45: a wait of minutes with one line at its start read as a hang."""
    from ddpctl.backends.control import wait_until_running

    said: list[str] = []
    clock = iter([0.0, 0.0, 10.0, 31.0, 50.0, 61.0, 100.0])
    got = wait_until_running(
        RECORD, 100, said.append, state_fn=lambda _r: JobState("PENDING", reason="Priority"), poll_s=0.0,
        clock=lambda: next(clock),
    )  # fmt: skip
    assert got.state == "PENDING"
    assert [line.split("; ")[1] for line in said] == [f"at most {s} s more (--wait)" for s in (100, 69, 39)]
