"""ddpctl's Python API, for notebooks, sweeps and other tools; the `ddpctl` command line is built on it.

    import ddpctl

    spec = ddpctl.load_spec("jobs/example.yaml", overrides=["nodes=2"])
    job = ddpctl.submit(spec, backend="local")          # or ddpctl.submit("jobs/example.yaml", ...)
    final = job.wait(timeout=600)                       # JobState: .state, .restarts, .exit_code, ...
    for line in job.logs(rank=0):                       # LogLine(attempt, node, rank, text)
        print(line.text)
    ddpctl.job("example").status()                      # any job in the registry, by name or id

Errors are the typed exceptions of `ddpctl.errors` (all `DdpctlError`): `str(err)` is the one line the CLI
prints for it. Nothing here imports torch, rich or submitit unless the chosen backend needs it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ddpctl.backends import current_state, get_backend
from ddpctl.errors import ArgumentError, JobNotFound, WaitTimeout
from ddpctl.logs.stream import LogLine
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState, StateFn
from ddpctl.spec import JobSpec, resolve_paths, spec_from_mapping, spec_to_mapping
from ddpctl.spec import load_spec as _read_spec
from ddpctl.spec.overrides import Overrides, as_overrides

if TYPE_CHECKING:
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.proc import Pending
    from ddpctl.slurm.cluster import ClusterFacts

__all__ = [
    "Job",
    "LogLine",
    "SpecLike",
    "cluster_facts",
    "job",
    "jobs",
    "load_spec",
    "plan",
    "spec_of",
    "submit",
    "submit_plan",
]

SpecLike = JobSpec | str | Path


def load_spec(path: str | Path, overrides: Overrides = (), *, cwd: str | Path | None = None) -> JobSpec:
    """Read, override (`"key.sub=value"` strings as `--set`, or a mapping `{"nodes": 4}`), validate and resolve
    a spec file.

    Relative paths written in the file start at the file's directory; those in `overrides` at `cwd` (default:
    the current directory), as `ddpctl submit` does. Raises `SpecError` naming the file, line, key, value and
    what is allowed.
    """
    return _read_spec(path, as_overrides(overrides), cwd=cwd)


def spec_of(spec_or_path: SpecLike, *, backend: str | None = None, overrides: Overrides = ()) -> JobSpec:
    """The spec `plan()` plans: read (a path), overridden, with `backend` applied and paths resolved."""
    return _spec_of(spec_or_path, overrides, backend)


def _spec_of(spec_or_path: SpecLike, overrides: Overrides, backend: str | None) -> JobSpec:
    extra = [*as_overrides(overrides), *([f"backend={backend}"] if backend else [])]
    if isinstance(spec_or_path, JobSpec):
        if not extra:
            return resolve_paths(spec_or_path, Path.cwd())
        spec = spec_from_mapping(spec_to_mapping(spec_or_path), spec_or_path.source, overrides=extra)
        return resolve_paths(spec, Path.cwd())
    return load_spec(spec_or_path, extra)


def cluster_facts(spec: JobSpec, *, with_nodes: bool = False) -> ClusterFacts:
    """The cluster's facts for this spec's backend, asked once (`ddpctl.slurm.cluster`); the local backend has
    none. `with_nodes`: also each node's GRES (one more controller question, for `doctor`)."""
    from ddpctl import proc
    from ddpctl.slurm.cluster import ClusterFacts, gather

    if not spec.capabilities.slurm:
        return ClusterFacts()
    if not proc.available("scontrol"):
        return ClusterFacts(why_missing="scontrol is not on PATH")
    return gather(with_nodes=with_nodes)


def plan(
    spec_or_path: SpecLike,
    *,
    backend: str | None = None,
    overrides: Overrides = (),
    cluster: ClusterFacts | Pending[ClusterFacts] | None = None,
) -> SubmissionPlan:
    """The frozen submission plan: what `submit` would submit, and what `ddpctl submit --dry-run` prints.

    `requeue.mode: auto` is decided here, from the cluster's facts (`plan.requeue_why` says why): `cluster`, or
    (None) gathered by `cluster_facts`. Raises `RequeueModeError` (a `SpecError`) where the backend cannot
    resume the way the spec or cluster needs.
    """
    import dataclasses

    from ddpctl.plan.requeue_mode import resolve_mode
    from ddpctl.proc import Pending, in_background

    spec = _spec_of(spec_or_path, overrides, backend)
    # The facts are controller round trips: asked (or still being asked) while this thread imports the renderer.
    waiting = in_background(lambda: cluster_facts(spec)) if cluster is None else cluster
    from ddpctl.plan import render  # noqa: F401  (imported here, beside the round trips; build() uses it)
    from ddpctl.plan.submission import build

    spec, why = resolve_mode(spec, waiting.result() if isinstance(waiting, Pending) else waiting)
    return dataclasses.replace(build(spec), requeue_why=why)


def submit(spec_or_path: SpecLike, *, backend: str | None = None, overrides: Overrides = ()) -> Job:
    """Submit a spec (a `JobSpec` or a spec file) and record it in the registry; returns at once.

    `backend` overrides the spec's (`sbatch`, `submitit` or `local`). Raises `SpecError` for a bad spec,
    `BackendUnavailable` when the backend cannot run here, `CommandError` when sbatch refuses the job.
    """
    return submit_plan(plan(spec_or_path, backend=backend, overrides=overrides))


def submit_plan(submission: SubmissionPlan) -> Job:
    """Submit exactly this plan (as `plan()` built it) and record it in the registry."""
    backend = get_backend(submission.backend)
    backend.check_available()
    Registry.from_env().check_writable()  # before anything is submitted: an unrecorded job could not be found
    source = Path(submission.spec.source)  # "<spec>" for a spec built in Python: recorded as it is
    record = backend.submit(submission, source.resolve() if source.is_file() else source)
    Registry.from_env().add(record)
    from ddpctl.plan.stopscan import scan_event
    from ddpctl.run import history
    from ddpctl.run.layout import RunLayout

    events = RunLayout(Path(record.run_dir)).events
    history.append(events, history.RequeueModeChosen(mode=submission.spec.requeue.mode, why=submission.requeue_why))
    history.append(events, scan_event(submission.spec))
    return Job(record)


def job(name_or_id: str | None = None, *, warn: Callable[[str], None] | None = None) -> Job:
    """A job from the registry by id, or by name: the running job of that name if there is one, else the
    newest; None: the newest job of all.

    `warn` hears the one line saying which job an ambiguous name chose (when the newest job of that name is not
    its only live one); by default nothing is printed. Raises `JobNotFound` (naming the registry and the names it
    knows) when there is none; `ArgumentError` when `name_or_id` is not a string.
    """
    if name_or_id is not None and not isinstance(name_or_id, str):
        raise ArgumentError(
            f"job: got {type(name_or_id).__name__} {name_or_id!r}; expected a job id or name as a string "
            f"(e.g. ddpctl.job({str(name_or_id)!r}))"
        )
    registry = Registry.from_env()
    if name_or_id is not None:
        from ddpctl.backends.names import resolve

        return Job(resolve(registry, name_or_id, warn=warn or _silent))
    records = registry.records()
    if not records:
        raise JobNotFound(f"no jobs in the registry {registry.path} yet: submit one with `ddpctl submit`")
    return Job(records[-1])


def _silent(_text: str) -> None:
    """The API prints nothing: a notebook or a sweep decides what to show."""


def jobs() -> list[Job]:
    """Every job in the registry, oldest submission first."""
    return [Job(record) for record in Registry.from_env().records()]


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

    def preempt(self, kind: str = "preemption") -> None:
        """Rehearse: deliver the warning signal as Slurm would; the requeue is charged to `kind`
        (`preemption` or `timeout`)."""
        if kind not in ("preemption", "timeout"):
            from ddpctl.errors import DdpctlError

            raise DdpctlError(f"preempt kind: got {kind!r}, expected preemption or timeout")
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
