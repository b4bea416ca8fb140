"""Backends: how a planned job reaches compute, and what becomes of it. All share the run-dir layout, the
registry, the launcher and the requeue decision.

    SubmissionPlan ──submit──▶ sbatch     (our batch script; Slurm runs it; slurm/jobs: state/cancel/preempt)
                            ─▶ submitit   (submitit's executor with the plan's parameters; the same launcher)
                            ─▶ local      (a detached supervisor, local/supervisor, plays the batch shell)
    LoadedSweep ──submit_sweep──▶ slurm/array (one held Slurm job array) or local/sweep
                          (one detached queue process that starts each task as a local job; local/queue: a
                          task's state before its turn)
    JobRecord ──state/cancel/preempt──▶ the same backend (`current_state` is the one state query; a sweep's
                          tasks: `task_states`, `cancel_sweep`; `prune`: `live_ids`, `holds_run`)

What each backend can do is its row of ddpctl.spec.capabilities (chain, containers, Slurm or not, what its
plan submits), which plan/ and doctor read instead of the backend's name. `slurm/state` reads a job's state from
squeue, scontrol and the run's events (no accounting needed).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ddpctl.errors import SpecError
from ddpctl.run import history
from ddpctl.run.history import Submitted
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.spec.capabilities import BACKENDS, SLURM_BACKENDS, Capabilities

__all__ = ["MODULES", "SLURM_BACKENDS", "Backend", "current_state", "get_backend", "live_ids", "task_states"]

if TYPE_CHECKING:  # the plan (and the node code it previews) is not needed to ask a job's state
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.run.layout import RunLayout
    from ddpctl.spec import JobSpec
    from ddpctl.spec.sweepload import Sweep as LoadedSweep

# Each backend's module, from its row of the capability table (the one list of backends).
MODULES = {name: f"ddpctl.backends.{caps.module or name}" for name, caps in BACKENDS.items()}


class Backend(Protocol):
    name: str
    capabilities: Capabilities  # what it can do, its row of ddpctl.spec.capabilities.BACKENDS

    def check_available(self) -> None:
        """Raise BackendUnavailable with what to do when this backend cannot run here."""

    def submit(self, plan: SubmissionPlan, spec_path: Path) -> JobRecord:
        """Submit exactly `plan` (from `ddpctl.plan.submission.build`); record it in the run dir's events."""

    def state(self, record: JobRecord) -> JobState: ...

    def cancel(self, record: JobRecord) -> None: ...

    def preempt(self, record: JobRecord, kind: str) -> None: ...

    # Sweeps (`ddpctl sweep`, `ddpctl.sweep`): each backend runs its own, the API asks no backend by name.
    sweep_kind: str  # what a sweep is here, for people: "job array", "local queue"

    def check_sweep(self, name: str, tasks: int) -> None:
        """Refuse a sweep of this many tasks before anything is written (SpecError), where the backend knows."""

    def submit_sweep(
        self, loaded: LoadedSweep, spec_path: Path, add_records: Callable[[list[JobRecord]], None]
    ) -> list[JobRecord]:
        """Plan the checked sweep for where it runs, submit it, record its tasks with `add_records`."""

    def sweep_task_states(self, records: list[JobRecord]) -> list[str]:
        """Each task's state, by the records' order (one sweep's tasks)."""

    def cancel_sweep(self, array_job: str, records: list[JobRecord]) -> None:
        """End every task of the sweep, pending or running."""

    # Liveness for `prune`: which jobs may still run, and whether one holds its run dir right now.
    def live_ids(self, records: list[JobRecord]) -> set[str]: ...

    def holds_run(self, run_dir: Path) -> bool: ...


def get_backend(name: str) -> Backend:
    if name not in MODULES:
        raise SpecError(f"backend: got {name!r}, expected one of {', '.join(sorted(MODULES))}")
    backend: Backend = importlib.import_module(MODULES[name]).BACKEND
    return backend


def task_states(records: Sequence[JobRecord]) -> list[str]:
    """Each task of one sweep's state, by the records' order (`list`, `cancel`, `sweep results`), asked of the
    backend that runs it; [] for records that are no sweep's."""
    if not records or records[0].sweep is None:
        return []
    return get_backend(records[0].backend).sweep_task_states(list(records))


def live_ids(records: list[JobRecord]) -> set[str]:
    """Which of these jobs may still run (`prune`), asked of each job's backend. A record of a backend this
    ddpctl does not know is kept: live."""
    by_backend: dict[str, list[JobRecord]] = {}
    for record in records:
        by_backend.setdefault(record.backend, []).append(record)
    live: set[str] = set()
    for name, group in by_backend.items():
        live |= get_backend(name).live_ids(group) if name in MODULES else {r.job_id for r in group}
    return live


def current_state(record: JobRecord) -> JobState:
    """A job's state, whatever the backend: the one query `status`, `logs -f` and `--wait` use."""
    return get_backend(record.backend).state(record)


def note_submitted(events: Path, job_id: str, backend: str, spec_path: Path) -> None:
    """Append the run's `submitted` event: the one place a job of a run is recorded as submitted, by whichever
    backend submitted it (a job, or each task of a sweep)."""
    history.append(events, Submitted(job_id=job_id, backend=backend, spec=str(spec_path)))


def submitted_record(
    layout: RunLayout, spec: JobSpec, job_id: str, backend: str, spec_path: Path, *, pid: int | None = None
) -> JobRecord:
    """The registry's record of a job a backend just submitted, its run dir committed under the job id."""
    return JobRecord(
        job_id=job_id,
        name=spec.name,
        run_dir=str(layout.root),
        backend=backend,
        submitted_at=time.time(),
        spec_path=str(spec_path),
        pid=pid,
    )
