"""The handle on a submitted job that `ddpctl.api` returns (`submit`, `job`, `jobs`): its state, waiting for its
end, its logs, cancelling and preempting it, the same on every backend."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ddpctl.backends import current_state, get_backend
from ddpctl.errors import ArgumentError, DdpctlError, WaitTimeout
from ddpctl.logs.stream import LogLine
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState, StateFn

MIN_POLL_S = 0.2  # `Job.wait`'s poll floor: a poll may be a controller round trip (squeue)


def seconds_arg(name: str, value: object, *, allow_none: bool = False) -> float | None:
    """A duration argument of the API as a float, or `ArgumentError` naming it, its value and what is allowed."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(f"{name}: got {value!r}; expected a number of seconds" + (" or None" if allow_none else ""))
    if math.isnan(value) or value < 0:
        raise ArgumentError(f"{name}: got {value!r}; expected a number of seconds >= 0")
    return float(value)


def check_preempt_kind(kind: str) -> None:
    """`Job.preempt`'s `kind` (a local or a remote job's): the budget a rehearsed requeue is charged to."""
    if kind not in ("preemption", "timeout"):
        raise DdpctlError(f"preempt kind: got {kind!r}, expected preemption or timeout")


class Job:
    """A submitted job: ask its state, wait for it, read its logs, cancel or preempt it."""

    def __init__(self, record: JobRecord, state_fn: StateFn = current_state) -> None:
        self.record = record
        self._state_fn = state_fn

    def __repr__(self) -> str:
        return f"Job({self.job_id!r}, name={self.name!r}, backend={self.backend!r})"

    @property
    def job_id(self) -> str:
        return self.record.job_id

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def backend(self) -> str:
        return self.record.backend

    @property
    def run_dir(self) -> Path:
        return Path(self.record.run_dir)

    def status(self) -> JobState:
        """The current state (PENDING, RUNNING, REQUEUED, COMPLETED, FAILED, BUDGET_SPENT, ...); a FAILED one's
        reason carries the cause and the first error `logs --errors` finds."""
        from ddpctl.logs.cause import with_cause
        from ddpctl.run.layout import RunLayout

        return with_cause(self._state_fn(self.record), RunLayout(self.run_dir))

    def wait(
        self, timeout: float | None = None, *, poll_s: float = 1.0, on_state: Callable[[JobState], None] | None = None
    ) -> JobState:
        """Poll until the job reaches a terminal state and return it; `on_state` sees every polled state.

        `timeout`: seconds (None or inf: no limit); `poll_s`: seconds between polls, never less than
        `MIN_POLL_S` (each poll may be an squeue call). Raises `WaitTimeout` (also a `TimeoutError`) after
        `timeout` seconds, the job still running; `ArgumentError` for a timeout or poll_s that is not a
        number, NaN or negative.
        """
        limit = seconds_arg("timeout", timeout, allow_none=True)
        poll_s = max(MIN_POLL_S, seconds_arg("poll_s", poll_s) or 0.0)
        deadline = None if limit is None or math.isinf(limit) else time.monotonic() + limit
        while True:
            state = self.status()
            if on_state is not None:
                on_state(state)
            if state.terminal:
                return state
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {self.job_id} ({self.name}): still {state.state} after {timeout} s")
            pause = poll_s if deadline is None else min(poll_s, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)

    def cancel(self) -> None:
        """Cancel the job (`JobNotActive` when it already ended; the same on every backend)."""
        from ddpctl.backends.control import control

        control(self.record, "cancel", lambda: get_backend(self.backend).cancel(self.record), self._state_fn)

    def newest_checkpoint(self) -> Path | None:
        """The run's newest complete checkpoint (`step-N` of runtime.Checkpointer; for a script with checkpoints
        of its own, the newest entry of its checkpoint directory); None before the first."""
        from ddpctl.health.report import newest_checkpoint
        from ddpctl.run.layout import RunLayout

        return newest_checkpoint(RunLayout(self.run_dir))

    def preempt(self, kind: str = "preemption") -> None:
        """Rehearse: deliver the warning signal as Slurm would; the requeue is charged to `kind`
        (`preemption` or `timeout`)."""
        check_preempt_kind(kind)
        from ddpctl.backends.control import control

        control(self.record, "preempt", lambda: get_backend(self.backend).preempt(self.record, kind), self._state_fn)

    def logs(
        self,
        *,
        follow: bool = False,
        rank: int | Sequence[int] | str | None = None,
        node: str | None = None,
        attempt: int | str | None = None,
        grep: str | None = None,
    ) -> Iterator[LogLine]:
        """The job's rank output as `LogLine`s, as `ddpctl logs` selects it.

        `rank`: a rank, ranks, or a spec like "0,3-5"; `attempt`: a number, "all", or None for the latest;
        `follow`: keep yielding new lines (across requeues) until the job ends. Bad filters raise `LogsError`.
        """
        from ddpctl.logs.core import LineFilter, compile_grep, parse_attempt, parse_nodes, parse_rank_spec
        from ddpctl.logs.show import LogsRequest

        ranks = (
            parse_rank_spec(rank)
            if isinstance(rank, str)
            else frozenset([rank])
            if isinstance(rank, int)
            else None
            if rank is None
            else frozenset(rank)
        )
        flt = LineFilter(
            ranks=ranks,
            nodes=None if node is None else parse_nodes(node),
            grep=None if grep is None else compile_grep(grep),
        )
        attempt_arg = None if attempt is None else parse_attempt(str(attempt))
        request = LogsRequest(follow=follow, attempt=attempt_arg, flt=flt)
        from ddpctl.logs.stream import stream_logs

        return stream_logs(self.record, request, self._state_fn)
