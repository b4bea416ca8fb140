"""Sweeps in the API: `ddpctl.sweep(spec_path, grid={...}, max_parallel=...)` submits one Slurm job array (the
local backend: a detached queue on this machine) and returns a `Sweep`, whose tasks are ordinary `Job`s
(`.jobs`); `ddpctl sweep` is built on `submit_loaded`.

    sw = ddpctl.sweep("jobs/train.yaml", grid={"env.LR": [1e-3, 3e-4]}, max_parallel=2)
    sw.wait(timeout=3600)        # every task's final JobState
    for ranked in sw.results():  # each task's final and best heartbeat values, best first
        print(ranked.task.name, ranked.task.final)
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpctl.api.handle import MIN_POLL_S, Job, seconds_arg
from ddpctl.backends import get_backend, task_states
from ddpctl.errors import ArgumentError, JobNotFound, WaitTimeout
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState
from ddpctl.run.sweeps import count_line, counts, sweep_first, sweep_tasks
from ddpctl.spec.overrides import Overrides, as_overrides

if TYPE_CHECKING:
    from ddpctl.health.results import Ranked
    from ddpctl.spec.sweepload import Sweep as LoadedSweep


class Sweep:
    """A submitted sweep: its array job, its tasks as `Job`s (`.jobs`, by index), waiting and results."""

    def __init__(self, records: Sequence[JobRecord]) -> None:
        if not records or records[0].sweep is None:
            raise ArgumentError("Sweep: expected the registry records of a sweep's tasks")
        self.array_job: str = records[0].sweep
        self.name = records[0].name
        self.jobs = [Job(record) for record in records]
        self.kind = get_backend(records[0].backend).sweep_kind  # "job array", "local queue"

    def __repr__(self) -> str:
        return f"Sweep({self.array_job!r}, name={self.name!r}, tasks={len(self.jobs)})"

    @property
    def run_base(self) -> Path:
        return self.jobs[0].run_dir.parent

    def status(self) -> list[JobState]:
        return [job.status() for job in self.jobs]

    def wait(self, timeout: float | None = None, *, poll_s: float = 5.0) -> list[JobState]:
        """Poll until every task has ended; each task's final state, by index. `WaitTimeout` after `timeout`
        seconds with a task still going (each poll asks every unfinished task's state)."""
        limit = seconds_arg("timeout", timeout, allow_none=True)
        poll_s = max(MIN_POLL_S, seconds_arg("poll_s", poll_s) or 0.0)
        deadline = None if limit is None or math.isinf(limit) else time.monotonic() + limit
        final: dict[int, JobState] = {}
        while True:
            for index, job in enumerate(self.jobs):
                if index not in final and (state := job.status()).terminal:
                    final[index] = state
            if len(final) == len(self.jobs):
                return [final[index] for index in range(len(self.jobs))]
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(
                    f"sweep {self.name} (array job {self.array_job}): {len(self.jobs) - len(final)} of "
                    f"{len(self.jobs)} tasks still going after {timeout} s"
                )
            time.sleep(poll_s if deadline is None else min(poll_s, max(0.0, deadline - time.monotonic())))

    def results(self, metric: str = "loss", mode: str = "min") -> list[Ranked]:
        """Each task's final and best heartbeat values (`ddpctl sweep results`), best first; partial while
        tasks run."""
        from ddpctl.health.results import rank, read_task

        return rank([read_task(job.run_dir) for job in self.jobs], metric, mode)

    def cancel(self) -> None:
        """End every task (`scancel` of the array job; local: its queue starts no further task and the running
        ones are cancelled); `JobNotActive` when every task has ended already."""
        from ddpctl.backends.control import JobNotActive

        records = [job.record for job in self.jobs]
        states = task_states(records)
        left = counts(states)
        if left["running"] + left["pending"] == 0 and "UNKNOWN" not in states:
            raise JobNotActive(
                f"sweep {self.name} (job array {self.array_job}) already ended: {count_line(states)}; nothing to cancel"
            )
        get_backend(records[0].backend).cancel_sweep(self.array_job, records)
        from ddpctl.backends.control import close_trackers
        from ddpctl.run.state import TERMINAL

        close_trackers([record for record, state in zip(records, states, strict=False) if state not in TERMINAL])


def sweep(
    spec_path: str | Path,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    zipped: Mapping[str, Sequence[Any]] | None = None,
    max_parallel: int | None = None,
    name: str | None = None,
    overrides: Overrides = (),
) -> Sweep:
    """Submit the spec file over `grid` (every combination of the keys' values) and `zipped` (values taken
    together) as one Slurm job array of at most `max_parallel` tasks at once (local backend: a detached queue,
    default 1 at once), as `ddpctl sweep` does. Values are
    spec values (written as JSON, as `overrides=` mappings are). Raises `SpecError` for a bad point."""
    from ddpctl.spec.sweepload import load_sweep

    loaded = load_sweep(
        spec_path,
        as_overrides(overrides),
        grid=axis_words("grid", grid),
        zipped=axis_words("zipped", zipped),
        max_parallel=max_parallel,
        name=name,
    )
    return submit_loaded(loaded)


def axis_words(what: str, axes: Mapping[str, Sequence[Any]] | None) -> list[str]:
    """`{"env.LR": [1e-3, 3e-4]}` → ['env.LR=0.001,0.0003'] (each value as JSON: a string with a comma stays
    one value)."""
    if axes is None:
        return []
    if not isinstance(axes, Mapping):
        raise ArgumentError(f"{what}: got {type(axes).__name__}; expected a mapping of spec keys to lists of values")
    words = []
    for key, values in axes.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise ArgumentError(f"{what}: {key}: got {values!r}; expected a list of values")
        try:
            words.append(f"{key}=" + ",".join(json.dumps(v, allow_nan=False) for v in values))
        except (TypeError, ValueError) as err:
            raise ArgumentError(f"{what}: {key}: {values!r} holds a value that is not a spec value ({err})") from None
    return words


def submit_loaded(loaded: LoadedSweep) -> Sweep:
    """Submit the checked sweep through its backend (`Backend.submit_sweep`: plan it for where it runs, submit,
    record its tasks): one Slurm job array, or on the local backend one detached queue (backends/local/sweep)."""
    spec = loaded.spec
    if spec.cluster is not None:  # not silently here: `ddpctl sweep` sends it to the cluster, the API does not yet
        raise ArgumentError(
            f"{spec.source}: cluster: {spec.cluster!r}: ddpctl.sweep runs a sweep here only; "
            "`ddpctl sweep` runs it on a cluster"
        )
    backend = get_backend(spec.backend)
    backend.check_sweep(spec.name, len(loaded.points))  # before anything is written
    registry = Registry.from_env()
    registry.check_writable()  # before anything is submitted: unrecorded tasks could not be found
    source = Path(spec.source)
    spec_path = source.resolve() if source.is_file() else source
    return Sweep(backend.submit_sweep(loaded, spec_path, registry.add_all))


def find_sweep(ref: str) -> Sweep | None:
    """The sweep `ref` names (its array job id, or a name whose newest job is a sweep task); None: no sweep."""
    tasks = sweep_first(Registry.from_env().records(), ref)
    return Sweep(tasks) if tasks else None


def sweep_of(ref: str) -> Sweep:
    """The sweep `ref` names, asked for as a sweep: a later plain job of the same name does not hide it."""
    tasks = sweep_tasks(Registry.from_env().records(), ref)
    found = Sweep(tasks) if tasks else None
    if found is None:
        raise JobNotFound(f"sweep {ref!r}: no sweep of that array job id or name in the registry")
    return found


def result_dirs(refs: Sequence[str], records: Sequence[JobRecord]) -> list[Path]:
    """`ddpctl sweep results REF...`: each REF a directory (a run dir or a directory of them), else a sweep the
    registry knows by name or array job id (its tasks' run dirs, by index); at most MAX_TASKS run dirs."""
    from ddpctl.health.results import MAX_TASKS, find_tasks

    found: list[Path] = []
    for ref in refs:
        path = Path(ref)
        tasks = [] if path.is_dir() else sweep_tasks(records, ref)
        if tasks:
            found += [Path(task.run_dir) for task in tasks]
        elif os.path.lexists(path):
            found += find_tasks([path])  # a directory, or one line saying what else it is
        else:
            raise JobNotFound(
                f"sweep results: {ref!r}: no such directory, and no sweep of that name or array job id in the registry"
            )
        if len(found) > MAX_TASKS:
            raise ArgumentError(f"more than {MAX_TASKS} run dirs named; name fewer (a sweep has at most 1001 tasks)")
    return found


def records_for(records: Sequence[JobRecord], run_dirs: Sequence[Path]) -> dict[str, JobRecord]:
    """The registry's record of each run dir it knows (by absolute path, the path as recorded or with links
    resolved), keyed by the record's run dir (pure but for resolving the named dirs' links)."""
    wanted = {key for run_dir in run_dirs for key in _dir_keys(run_dir)}
    return {record.run_dir: record for record in records if record.run_dir in wanted}


def result_points(records: Sequence[JobRecord], run_dirs: Sequence[Path]) -> dict[Path, str]:
    """Each sweep task's grid values (`lr=0.1 batch=32`) where the registry knows its job (pure but for links)."""
    known = records_for(records, run_dirs)
    return {
        run_dir: point
        for run_dir in run_dirs
        if (point := next((known[k].point for k in _dir_keys(run_dir) if k in known), None))
    }


def result_states(records: Sequence[JobRecord], run_dirs: Sequence[Path]) -> dict[Path, str]:
    """Each run dir's job state where the registry knows its job (one squeue call per sweep, as `list`), for
    the results table's state column; a run dir of no known job is left out."""
    known = records_for(records, run_dirs)
    by_sweep: dict[str, list[JobRecord]] = {}
    state_of: dict[str, str] = {}
    for record in known.values():
        if record.sweep is not None:
            by_sweep.setdefault(record.sweep, []).append(record)
        else:
            state_of[record.run_dir] = Job(record).status().state
    for tasks in by_sweep.values():
        state_of.update(zip((t.run_dir for t in tasks), task_states(tasks), strict=True))
    out = {}
    for run_dir in run_dirs:
        for key in _dir_keys(run_dir):
            if key in state_of:
                out[run_dir] = state_of[key]
                break
    return out


def _dir_keys(run_dir: Path) -> tuple[str, str]:
    """How a registry record may name this run dir: absolute as given, or with links resolved."""
    return str(run_dir.absolute()), str(run_dir.resolve())
