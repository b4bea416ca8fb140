"""The requeue decision: literal tables of (run outcome, budgets used) → action, charge, exit status."""

from __future__ import annotations

import pytest

from ddpctl import exitcodes
from ddpctl.node.decide import Decision, RunOutcome, classify_signal, decide, root_exit
from ddpctl.run.history import Kind, RunHistory
from ddpctl.spec import RequeuePolicy

POLICY = RequeuePolicy(enabled=True, signal="USR2", lead_s=120, max_preemptions=2, max_timeouts=1, max_failures=0)
NONE_USED: dict[Kind, int] = {"preemption": 0, "timeout": 0, "failure": 0, "node_failure": 0}


@pytest.mark.parametrize(
    ("outcome", "used", "action", "kind", "code"),
    [
        (RunOutcome(0, False, None), NONE_USED, "finish", None, 0),
        (RunOutcome(0, True, "preemption"), NONE_USED, "requeue", "preemption", 0),
        (RunOutcome(0, True, "timeout"), NONE_USED, "requeue", "timeout", 0),
        (RunOutcome(0, True, "preemption"), {**NONE_USED, "preemption": 1}, "requeue", "preemption", 0),
        (RunOutcome(0, True, "preemption"), {**NONE_USED, "preemption": 2}, "finish", "preemption", 76),
        (RunOutcome(0, True, "timeout"), {**NONE_USED, "timeout": 1}, "finish", "timeout", 76),
        # Separate budgets: spent preemptions do not block a timeout requeue.
        (RunOutcome(0, True, "timeout"), {**NONE_USED, "preemption": 9}, "requeue", "timeout", 0),
        # A crash with max_failures=0 ends the job with the step's own status, charged to failures.
        (RunOutcome(1, False, None), NONE_USED, "finish", "failure", 1),
        (RunOutcome(137, False, None), NONE_USED, "finish", "failure", 137),
        # Signalled but the workers died before checkpointing: still resumes from the last complete one.
        (RunOutcome(137, False, "preemption"), NONE_USED, "requeue", "preemption", 0),
        # Training finished before the stop took effect: a late signal must not requeue a completed job.
        (RunOutcome(0, False, "preemption"), NONE_USED, "finish", None, 0),
        (RunOutcome(0, False, "timeout"), NONE_USED, "finish", None, 0),
        # Stopped marker without a recorded signal (e.g. the event line was lost): a preemption.
        (RunOutcome(0, True, None), NONE_USED, "requeue", "preemption", 0),
    ],
)
def test_decide_table(outcome: RunOutcome, used: dict[Kind, int], action: str, kind: str | None, code: int) -> None:
    decision = decide(outcome, POLICY, used)
    assert (decision.action, decision.kind, decision.exit_code) == (action, kind, code)


REQUEUE_HANG = ("requeue", "node_failure", 0, "node_failure (hang): requeue 1 of 5")


@pytest.mark.parametrize(
    ("outcome", "used", "expected"),
    [
        # A hang the watchdog ended is charged to max_node_failures (default 5), not max_failures (0).
        (RunOutcome(1, False, None, "hang"), NONE_USED, REQUEUE_HANG),
        (
            RunOutcome(1, False, None, "hang"),
            {**NONE_USED, "node_failure": 5},
            ("finish", "node_failure", 1, "node_failure (hang) budget spent: 5 of max_node_failures=5 requeues used"),
        ),
        # The time-limit signal arrived after the hang had ended the attempt: the hang is what ended it.
        (RunOutcome(143, False, "timeout", "hang"), NONE_USED, REQUEUE_HANG),
        # An agreed stop despite a hang marker (the ranks recovered and stopped): the stop's kind.
        (RunOutcome(0, True, "timeout", "hang"), NONE_USED, ("requeue", "timeout", 0, "timeout: requeue 1 of 1")),
        # A spent failure budget does not block an infrastructure requeue, nor the other way round.
        (RunOutcome(1, False, None, "hang"), {**NONE_USED, "failure": 9}, REQUEUE_HANG),
        (
            RunOutcome(1, False, None),
            {**NONE_USED, "node_failure": 0},
            ("finish", "failure", 1, "failure budget spent: 0 of max_failures=0 requeues used"),
        ),
    ],
)
def test_infrastructure_failures_have_their_own_budget(
    outcome: RunOutcome, used: dict[Kind, int], expected: tuple[str, str, int, str]
) -> None:
    decision = decide(outcome, RequeuePolicy(max_timeouts=1), used)
    assert (decision.action, decision.kind, decision.exit_code, decision.reason) == expected


def test_count_requeues_counts_node_failures() -> None:
    events = [{"event": "decision", "attempt": 0, "action": "requeue", "kind": "node_failure"}]
    assert RunHistory.from_records(events).requeues_used(1) == {**NONE_USED, "node_failure": 1}


def test_failure_budget_allows_requeues() -> None:
    policy = RequeuePolicy(max_failures=2)
    assert decide(RunOutcome(1, False, None), policy, NONE_USED).action == "requeue"
    assert decide(RunOutcome(1, False, None), policy, {**NONE_USED, "failure": 2}).action == "finish"


def test_requeue_disabled_finishes_with_the_step_status() -> None:
    decision = decide(RunOutcome(3, False, None), RequeuePolicy(enabled=False), NONE_USED)
    assert (decision.action, decision.exit_code) == ("finish", 3)
    assert "disabled" in decision.reason


def test_budget_reason_names_the_key_and_numbers() -> None:
    decision = decide(RunOutcome(0, True, "preemption"), POLICY, {**NONE_USED, "preemption": 2})
    assert decision.reason == "preemption budget spent: 2 of max_preemptions=2 requeues used"


@pytest.mark.parametrize(
    ("time_left", "lead", "kind"),
    [
        (120, 120, "timeout"),
        (90, 120, "timeout"),
        (160, 120, "timeout"),
        (170, 120, "preemption"),
        (3600, 120, "preemption"),
        (None, 120, "preemption"),
        (0, 60, "timeout"),
        (106, 60, "preemption"),
    ],
)
def test_classify_signal(time_left: int | None, lead: int, kind: str) -> None:
    assert classify_signal(time_left, lead) == kind


def test_requeues_used_charge_each_earlier_attempt_once() -> None:
    events = [
        {"event": "decision", "attempt": 0, "action": "requeue", "kind": "preemption"},
        {"event": "signal", "attempt": 1, "kind": "timeout"},
        {"event": "decision", "attempt": 1, "action": "requeue", "kind": "timeout"},
        # Attempt 2 was requeued by Slurm itself (grace time ran out): charged to its signal's kind.
        {"event": "signal", "attempt": 2, "kind": "preemption"},
        # Attempt 3 got no signal and no decision (e.g. a node failure): charged as a preemption.
        # The current attempt (4) is not counted yet.
        {"event": "decision", "attempt": 4, "action": "requeue", "kind": "failure"},
    ]
    assert RunHistory.from_records(events).requeues_used(4) == {**NONE_USED, "preemption": 3, "timeout": 1}


def test_no_requeue_is_used_on_the_first_attempt() -> None:
    past = RunHistory.from_records([{"event": "decision", "attempt": 0, "action": "requeue", "kind": "timeout"}])
    assert past.requeues_used(0) == NONE_USED


def test_finished_attempt_is_not_charged() -> None:
    events = [{"event": "decision", "attempt": 0, "action": "finish", "kind": "failure"}]
    assert RunHistory.from_records(events).requeues_used(1) == NONE_USED


def test_decision_event_fields() -> None:
    assert Decision("requeue", "timeout", "r", 0).as_event(3, 143, True).as_json() == {
        "event": "decision",
        "t": None,
        "attempt": 3,
        "step_exit": 143,
        "stopped": True,
        "action": "requeue",
        "kind": "timeout",
        "reason": "r",
        "exit_code": 0,
    }
    assert exitcodes.BUDGET_SPENT not in (exitcodes.OK, exitcodes.USAGE)


@pytest.mark.parametrize(
    ("step_exit", "node_exits", "root"),
    [
        (0, [0, 0], 0),
        (143, [1, 143], 1),
        (143, [143, 1], 1),
        (1, [1, 143], 1),
        (137, [137, 143], 137),
        (143, [], 143),
        (2, [3, 2], 3),
    ],
)
def test_root_exit_prefers_the_node_that_failed_on_its_own(step_exit: int, node_exits: list[int], root: int) -> None:
    assert root_exit(step_exit, node_exits) == root
