"""A failure that repeats is the script's or the setup's, not a node's (pure; ddpctl.node.decide asks it).

Two consecutive attempts that failed with the same cause at the same place (a hang's function, the first error
line) and the same step end the run, whatever the budgets say and whatever the cause's class: a dead node does
not follow the job from attempt to attempt, a bug or a misconfiguration does, and retrying it spends the budget
meant for real node failures (an NCCL usage error retried as dead nodes until max_node_failures was gone). The
rule also works when no checkpoint exists yet, where requeue.max_stalled_attempts cannot tell.

Conservative, since ending a healthy run is as bad as missing a fault: a rank killed by a signal, a hang and an
OOM kill count as the same only at a known, equal step (a sick fleet can kill two ranks with SIGKILL anywhere);
a lost node or a failed node check never repeats this way (the excluded node is gone); an error at no known step
(before the first, or a script without a heartbeat) repeats only on another node, since the same error on the
same node twice is a bad node (ddpctl.node.exclude excludes it and the run goes on) — except a setup error,
which fails alike everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpctl.run.history import Cause, Decided

REPEATABLE: frozenset[Cause] = frozenset({"script-error", "setup-error", "hang", "rank-crash", "oom"})
NEEDS_STEP: frozenset[Cause] = frozenset({"hang", "rank-crash", "oom"})
# What differs between two runs of the same failure: addresses, pids, times of day, durations.
_VOLATILE = re.compile(
    r"0x[0-9a-fA-F]+|\bpid[ :=]+\d+|\b\d{1,2}:\d{2}:\d{2}(\.\d+)?|\b\d+(\.\d+)? ?(s|ms|seconds)\b|\bport \d+"
)
PLACE_MAX = 200


def place_key(text: str) -> str:
    """The failure's place with what varies between runs of the same failure taken out."""
    return _VOLATILE.sub("#", text).strip()[:PLACE_MAX]


@dataclass(frozen=True)
class Failure:
    """One attempt's failure as the decision records it (`Decided.cause`, `cause_step`, `cause_at`)."""

    attempt: int
    cause: Cause
    step: int | None  # the step the attempt reached (None: none, or unknown)
    at: str  # place_key of where it failed
    node: str | None = None  # the node that failed first, where known

    @staticmethod
    def of(decided: Decided) -> Failure | None:
        if decided.cause is None or decided.kind not in ("failure", "node_failure") or decided.cause_at is None:
            return None
        return Failure(decided.attempt, decided.cause, decided.cause_step, decided.cause_at, decided.cause_node)


def same(before: Failure, now: Failure) -> bool:
    """Whether `now` repeats `before` (module docstring)."""
    if now.attempt != before.attempt + 1 or now.cause != before.cause or now.cause not in REPEATABLE:
        return False
    if not now.at or now.at != before.at or now.step != before.step:
        return False
    if now.step is not None or now.cause == "setup-error":
        return True
    return now.cause not in NEEDS_STEP and now.node != before.node


def reason(before: Failure, now: Failure, text: str) -> str:
    """The decision's words for a repeat: a setup problem, the script's failure at a step, or either."""
    attempts = f"attempts {before.attempt} and {now.attempt}"
    if now.cause == "setup-error":
        return f"the same error on {attempts} ({text}): this looks like a setup problem, not a node; not retried"
    if now.step is not None:
        return f"the same failure at step {now.step} on {attempts} ({text}): the script's, not a node's; not retried"
    return f"the same error on {attempts} ({text}): the script's or its setup's, not a node's; not retried"
