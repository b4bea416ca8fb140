"""A run's history: its typed events in order, and every question ddpctl asks of them (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ddpctl import exitcodes
from ddpctl.run.history.base import KINDS, SIGNAL_KINDS, E, Event, Kind
from ddpctl.run.history.catalog import parse_event
from ddpctl.run.history.events import (
    AttemptStarted,
    Cancelled,
    ChainDropped,
    ChainSubmitted,
    Decided,
    Resumed,
    Signalled,
    StopUnacknowledged,
    Submitted,
)
from ddpctl.run.history.failures import HEALTH, HealthEvent, Hung, NodeExcluded, NodeExited
from ddpctl.run.state import JobState


@dataclass(frozen=True)
class Attempt:
    """One attempt (one run of the job, SLURM_RESTART_COUNT) and its events, in order."""

    number: int
    events: tuple[Event, ...]

    def all(self, cls: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, cls)]

    def first(self, cls: type[E]) -> E | None:
        return next((e for e in self.events if isinstance(e, cls)), None)

    def last(self, cls: type[E]) -> E | None:
        return next((e for e in reversed(self.events) if isinstance(e, cls)), None)

    @property
    def start(self) -> AttemptStarted | None:
        return self.first(AttemptStarted)

    @property
    def signal(self) -> Signalled | None:
        """The first stop request (warning/preemption signal) of the attempt."""
        return self.first(Signalled)

    @property
    def signal_kind(self) -> Kind | None:
        """What the attempt's last signal meant: timeout or preemption (None: no signal, or one not classified)."""
        last = self.last(Signalled)
        return next((k for k in SIGNAL_KINDS if last is not None and last.kind == k), None)

    @property
    def resume(self) -> Resumed | None:
        return self.last(Resumed)

    @property
    def decision(self) -> Decided | None:
        return self.last(Decided)

    @property
    def ended(self) -> bool:
        """A decision or a cancellation was recorded (a later attempt also ends this one: `RunHistory.attempts`)."""
        return self.decision is not None or self.first(Cancelled) is not None

    @property
    def node_exits(self) -> list[int]:
        """Each node's launcher status, in the order they were recorded."""
        return [e.exit for e in self.all(NodeExited) if e.exit is not None]

    @property
    def hung(self) -> bool:
        return self.first(Hung) is not None or any(e.hang for e in self.all(NodeExited))

    @property
    def charged(self) -> Kind | None:
        """The budget this attempt used: its recorded requeue's kind; without a decision (Slurm requeued it
        itself: the checkpoint outlasted the preemption grace time, or a node failed) its last signal's kind,
        preemption when none was recorded. None: it was not requeued."""
        decision = self.decision
        if decision is not None:
            return decision.kind if decision.action == "requeue" else None
        for signal in reversed(self.all(Signalled)):
            found = next((k for k in KINDS if signal.kind == k), None)
            if found is not None:
                return found
        return "preemption"


@dataclass(frozen=True)
class RunHistory:
    events: tuple[Event, ...] = ()

    @classmethod
    def from_records(cls, records: Iterable[object]) -> RunHistory:
        """From JSON records (tests' literal tables, an in-memory list); what `parse_event` rejects is left out."""
        return cls(tuple(e for r in records if (e := parse_event(r)) is not None))

    def all(self, cls: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, cls)]

    @cached_property
    def attempts(self) -> dict[int, Attempt]:
        """Every attempt any event names, by number; an attempt followed by a later one has ended."""
        found: dict[int, list[Event]] = {}
        for event in self.events:
            number = getattr(event, "attempt", None)
            if isinstance(number, int) and number >= 0:
                found.setdefault(number, []).append(event)
        return {n: Attempt(n, tuple(found[n])) for n in sorted(found)}

    def attempt(self, number: int) -> Attempt:
        return self.attempts.get(number) or Attempt(number, ())

    def ended(self, number: int) -> bool:
        return self.attempt(number).ended or number < max(self.attempts, default=-1)

    def started(self, number: int) -> bool:
        return self.attempt(number).start is not None

    def requeues_used(self, current: int) -> dict[Kind, int]:
        """Requeues so far, by budget kind: one per attempt before `current` (`Attempt.charged`)."""
        counts: dict[Kind, int] = dict.fromkeys(KINDS, 0)
        for number in range(current):
            kind = self.attempt(number).charged
            if kind is not None:
                counts[kind] += 1
        return counts

    def restarts(self) -> int:
        """Restarts so far: the newest attempt started, or one past an attempt whose decision was to requeue (the
        job is then in its requeue hold and the next attempt has not written anything yet)."""
        started = [e.attempt for e in self.all(AttemptStarted)]
        requeued = [e.attempt + 1 for e in self.all(Decided) if e.action == "requeue"]
        return max([0, *started, *requeued])

    def outcome(self) -> Decided | None:
        """The last decision recorded: the run's outcome once it is `finish`."""
        decisions = self.all(Decided)
        return decisions[-1] if decisions else None

    def final_state(self) -> JobState | None:
        """The state the last decision left the job in, if the job got that far."""
        last = self.outcome()
        if last is None:
            return None
        restarts, code = self.restarts(), last.exit_code
        if last.action == "requeue":
            return JobState("REQUEUED", restarts, last.reason)
        if code == exitcodes.OK:
            return JobState("COMPLETED", restarts, last.reason, exit_code=0)
        state = "BUDGET_SPENT" if code == exitcodes.BUDGET_SPENT else "FAILED"
        return JobState(state, restarts, last.reason, exit_code=code if code is not None else 1)

    def cancelled(self) -> bool:
        return bool(self.all(Cancelled))

    def finished_before(self, number: int) -> Decided | None:
        """The first `finish` decision of an attempt before `number` (a chained or requeued start must not train)."""
        return next((e for e in self.all(Decided) if e.action == "finish" and e.attempt < number), None)

    def chain_jobs(self, first_job: str) -> list[str]:
        """The run's jobs in order: the first one, then each successor not dropped again."""
        dropped = {e.job_id for e in self.all(ChainDropped)}
        return [job for job in [first_job, *(e.job_id for e in self.all(ChainSubmitted))] if job not in dropped]

    def successor_of(self, number: int) -> str | None:
        """The successor submitted by attempt `number` and not dropped again, if any."""
        found = None
        for event in self.attempt(number).events:
            if isinstance(event, ChainSubmitted):
                found = event.job_id
            elif isinstance(event, ChainDropped) and event.job_id == found:
                found = None
        return found

    def unacknowledged_unrecorded(self, number: int) -> bool:
        """Attempt `number` was signalled and no unacknowledged stop was recorded for it."""
        attempt = self.attempt(number)
        return attempt.signal is not None and attempt.first(StopUnacknowledged) is None

    def health(self, number: int | None = None) -> list[HealthEvent]:
        """The watchdog's and launchers' findings (hangs, stragglers, OOM kills), of one attempt or all."""
        found = [e for e in self.events if isinstance(e, HEALTH)]
        return [e for e in found if number is None or e.attempt == number]

    def span(self) -> tuple[float | None, float | None, str]:
        """The first attempt's start time, the newest record's time (submission aside), the newest node list."""
        starts = self.all(AttemptStarted)
        first = next((e.t for e in starts if e.t is not None), None)
        times = [e.t for e in self.events if e.t is not None and not isinstance(e, Submitted)]
        nodes = ""
        for start in starts:
            nodes = str(start.nodes or nodes)
        return first, max(times, default=None), nodes

    def excluded_nodes(self) -> frozenset[str]:
        """Nodes the run's next attempts must not use (`node-excluded` events that were applied)."""
        return frozenset(e.node for e in self.all(NodeExcluded) if e.applied)

    def exclusions(self) -> list[NodeExcluded]:
        """Every exclusion decided, applied or kept in by the bound, in order (status and doctor show them)."""
        return self.all(NodeExcluded)
