"""What to do when a run of the job ends: requeue, finish, or fail (pure; every driver of the attempt loop asks
it through `ddpctl.node.batch.decide_run`; that module's docstring holds the loop's contract).

Budgets are separate for preemptions, timeouts, crashes and infrastructure failures (spec `requeue.max_*`)
because they mean different things: preemption is the cluster's doing, a timeout is a planned continuation, a
crash is probably a bug, and an infrastructure failure (`node_failure`: a rank killed by a signal, a lost node,
a hang the watchdog ended; `ddpctl.node.blame` tells which) is probably not the script's fault, so one of them,
false alarms included, costs a restart from the checkpoint rather than the run. An OOM stays on the script's
budget: it repeats at the same step on the same memory (README, "Failures").
`scontrol requeue` has no cap of its own, so these budgets are the only thing that prevents an endless loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ddpctl import exitcodes
from ddpctl.node import repeat
from ddpctl.node.blame import Blame
from ddpctl.node.repeat import Failure, place_key
from ddpctl.run.history import RUN_ENDING_CAUSES, Action, Cause, Decided, Kind
from ddpctl.spec import RequeuePolicy

# The warning is sent lead_s before the limit, but Slurm checks limits only every 30 s, so it can arrive up
# to 30 s early; anything with more time left than this margin is a preemption, not the time limit.
TIMEOUT_SLACK_S = 45


def classify_signal(time_left_s: int | None, lead_s: int) -> Kind:
    """Warning signal or preemption, from the job's time left when the signal arrived (None: unlimited)."""
    if time_left_s is not None and time_left_s <= lead_s + TIMEOUT_SLACK_S:
        return "timeout"
    return "preemption"


def root_exit(step_exit: int, node_exits: list[int]) -> int:
    """The run's real exit status: srun reports whichever task it likes, often one it killed itself
    (--kill-on-bad-exit: 143) after another node failed; the first node that failed on its own (< 128) is the
    cause."""
    if step_exit == exitcodes.OK:
        return step_exit
    own = [code for code in node_exits if 0 < code < 128]
    return own[0] if own else step_exit


@dataclass(frozen=True)
class Progress:
    """Whether the attempt saved anything newer than what it resumed from (for requeue.max_stalled_attempts)."""

    resumed_from: int | None  # the step its ddpctl.runtime resume loaded (None: started from scratch)
    newest: int | None  # the newest complete checkpoint's step when it ended (None: none)
    stalled_before: int = 0  # failed attempts in a row right before this one that saved nothing newer

    @property
    def stalled(self) -> bool:
        return self.newest is None or (self.resumed_from is not None and self.newest <= self.resumed_from)


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int  # the step's (srun's) exit status
    stopped: bool  # ranks agreed on a stop step and wrote its checkpoint (the stopped marker exists)
    signal_kind: Kind | None  # kind of the warning/preemption signal received during this run, if any
    infra_cause: Cause | None = None  # an infrastructure failure that ended the run ("hang"), if any
    blame: Blame | None = None  # what ended it and who failed first (`ddpctl.node.blame`)
    progress: Progress | None = None  # None: unknown (the script does not resume through ddpctl.runtime)
    attempt: int = 0
    reached: int | None = None  # the step the attempt reached (a hang's culprit's; else its progress records')
    previous: Decided | None = None  # the decision about the attempt before, for ddpctl.node.repeat

    @property
    def infra(self) -> Cause | None:
        """A hang, a lost node or a failed node check (preflight, or during training): it ended the run, whatever
        signal came afterwards."""
        if self.infra_cause is not None:
            return self.infra_cause
        return self.blame.cause if self.blame is not None and self.blame.cause in RUN_ENDING_CAUSES else None


@dataclass(frozen=True)
class Decision:
    action: Action
    kind: Kind | None  # what the requeue is charged to
    reason: str
    exit_code: int  # the batch script's own exit status
    blame: Blame | None = None
    stalled: int = 0  # failed attempts in a row, this one included, that saved no newer checkpoint
    failure: Failure | None = None  # where it failed (recorded, so that the next decision can tell a repeat)

    def as_event(self, attempt: int, step_exit: int, stopped: bool) -> Decided:
        blame = self.blame
        return Decided(
            cause=blame.cause if blame is not None else None,
            cause_node=blame.node if blame is not None else None,
            cause_rank=blame.rank if blame is not None else None,
            cause_why=blame.why or None if blame is not None else None,
            cause_step=self.failure.step if self.failure is not None else None,
            cause_at=self.failure.at if self.failure is not None else None,
            stalled=self.stalled or None,
            attempt=attempt,
            step_exit=step_exit,
            stopped=stopped,
            action=self.action,
            kind=self.kind,
            reason=self.reason,
            exit_code=self.exit_code,
        )


def budget_of(policy: RequeuePolicy, kind: Kind) -> int:
    return {
        "preemption": policy.max_preemptions,
        "timeout": policy.max_timeouts,
        "failure": policy.max_failures,
        "node_failure": policy.max_node_failures,
    }[kind]


def run_kind(outcome: RunOutcome) -> Kind | None:
    """What ended this run; None means it completed normally."""
    if outcome.stopped:
        return outcome.signal_kind or "preemption"
    if outcome.exit_code == exitcodes.OK:
        return None  # finished before the stop took effect (a late signal changes nothing)
    if outcome.infra is not None:
        return "node_failure"  # it ended the run; a signal arriving afterwards found it already failed
    if outcome.signal_kind is not None:
        # Signalled, but the workers died before checkpointing: resume from the last complete checkpoint.
        return outcome.signal_kind
    if outcome.blame is not None and outcome.blame.infrastructure:
        return "node_failure"  # a rank killed by a signal (kill -9, SIGSEGV, SIGBUS): not the script's exception
    return "failure"  # the script's error, and an OOM (the script's memory use: see README's failures section)


def decide(outcome: RunOutcome, policy: RequeuePolicy, used: Mapping[Kind, int]) -> Decision:
    decision = replace(decide_kind(outcome, policy, used), blame=outcome.blame)
    stalled = stalled_count(outcome, decision.kind)
    decision = replace(decision, stalled=stalled, failure=failure_of(outcome, decision.kind))
    before = Failure.of(outcome.previous) if outcome.previous is not None else None
    if decision.action == "requeue" and decision.failure and before and repeat.same(before, decision.failure):
        text = outcome.blame.why if outcome.blame is not None else decision.failure.at
        code = outcome.exit_code if outcome.exit_code != exitcodes.OK else exitcodes.FAILURE
        return replace(decision, action="finish", reason=repeat.reason(before, decision.failure, text), exit_code=code)
    limit = policy.max_stalled_attempts
    if decision.action == "requeue" and limit and stalled >= limit and outcome.progress is not None:
        since = outcome.progress.resumed_from
        reason = (
            f"{decision.reason.split(':')[0]}: {stalled} attempts in a row ended without a complete checkpoint newer"
            f" than the one they resumed from ({'none' if since is None else f'step {since}'});"
            f" requeue.max_stalled_attempts={limit}: the same failure again, not retried"
        )
        code = outcome.exit_code if outcome.exit_code != exitcodes.OK else exitcodes.FAILURE
        return replace(decision, action="finish", reason=reason, exit_code=code)
    return decision


def failure_of(outcome: RunOutcome, kind: Kind | None) -> Failure | None:
    """The attempt's failure as the next decision compares it (ddpctl.node.repeat); None unless it failed."""
    blame = outcome.blame
    if kind not in ("failure", "node_failure") or blame is None:
        return None
    return Failure(outcome.attempt, blame.cause, outcome.reached, place_key(blame.place), blame.node)


def stalled_count(outcome: RunOutcome, kind: Kind | None) -> int:
    """Failed attempts in a row, this one included, that saved nothing newer than what they resumed from; 0
    for a stop, a completion, a signal, or where ddpctl cannot tell (no ddpctl.runtime resume recorded)."""
    progress = outcome.progress
    if kind not in ("failure", "node_failure") or progress is None or not progress.stalled:
        return 0
    return progress.stalled_before + 1


def decide_kind(outcome: RunOutcome, policy: RequeuePolicy, used: Mapping[Kind, int]) -> Decision:
    kind = run_kind(outcome)
    if kind is None:
        return Decision("finish", None, "training completed", exitcodes.OK)
    failed_code = outcome.exit_code if outcome.exit_code not in (exitcodes.OK,) else 1
    if not policy.enabled:
        return Decision("finish", kind, f"{kind}: requeue disabled in the spec", failed_code)
    budget, spent = budget_of(policy, kind), used.get(kind, 0)
    infra = outcome.infra or (outcome.blame.cause if outcome.blame is not None else None)
    cause = f" ({infra})" if kind == "node_failure" else ""
    if spent >= budget:
        reason = f"{kind}{cause} budget spent: {spent} of max_{kind_key(kind)}={budget} requeues used"
        # A crash keeps its own status (what `submit --wait` returns); a spent preemption/timeout budget
        # gets the distinct BUDGET_SPENT status so it is never mistaken for a crash.
        code = failed_code if kind in ("failure", "node_failure") else exitcodes.BUDGET_SPENT
        return Decision("finish", kind, reason, code)
    return Decision("requeue", kind, f"{kind}{cause}: requeue {spent + 1} of {budget}", exitcodes.OK)


def kind_key(kind: Kind) -> str:
    return {
        "preemption": "preemptions",
        "timeout": "timeouts",
        "failure": "failures",
        "node_failure": "node_failures",
    }[kind]
