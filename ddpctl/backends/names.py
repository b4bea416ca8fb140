"""Job names as people use them: one live job per name, an ambiguous name means the running job, typos get a hint.

The registry maps a name to every job ever submitted under it; which one a command means depends on the jobs'
states, so this lives with the backends (the registry itself stays a plain file reader).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ddpctl.backends import SLURM_BACKENDS, current_state
from ddpctl.backends.slurm.chain import run_jobs
from ddpctl.errors import CommandError, DdpctlError, JobNotFound
from ddpctl.proc import Runner
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState, StateFn
from ddpctl.run.sweeps import named_task, task_list
from ddpctl.slurm import commands

Warn = Callable[[str], None]
Prefilter = Callable[[list[JobRecord]], list[JobRecord]]
MAX_CHECKED = 5  # newest jobs of one name whose state is asked for: bounded work for a name used 1000 times


class DuplicateName(DdpctlError):
    """A job with this name is still queued or running."""


def possibly_live(records: list[JobRecord], runner: Runner = commands.bounded) -> list[JobRecord]:
    """The records that may not have ended: all but the Slurm ones none of whose jobs squeue lists, asked in one
    squeue call. Each record's full state costs a squeue and an scontrol call, and a name that is resubmitted
    all the time has several ended jobs: `submit` asked for each of them, on the way to sbatch."""
    # Of a chained run only its newest two jobs can be in the queue (each successor waits for its predecessor to
    # end, `current_job`): the squeue argument stays bounded however long a chain grew.
    slurm = {r.job_id: run_jobs(r)[-2:] for r in records if r.backend in SLURM_BACKENDS}
    ids = [job for jobs in slurm.values() for job in jobs]
    if any(not job.isdigit() for job in ids):  # an array task: squeue's ids for it differ; ask per record
        return records
    try:
        present = commands.queued(ids, runner)
    except CommandError:
        present = None
    if present is None:
        return records
    return [r for r in records if r.job_id not in slurm or present.intersection(slurm[r.job_id])]


def live(
    records: list[JobRecord], state_fn: StateFn, prefilter: Prefilter = possibly_live
) -> list[tuple[JobRecord, JobState]]:
    """The newest records (at most MAX_CHECKED) that have not ended, newest first."""
    out = []
    for record in prefilter([r for r in reversed(records[-MAX_CHECKED:]) if not r.final_state]):
        state = state_fn(record)
        if not state.terminal and state.state != "UNKNOWN":
            out.append((record, state))
    return out


def check_duplicate(
    registry: Registry, name: str, state_fn: StateFn = current_state, prefilter: Prefilter = possibly_live
) -> None:
    """Refuse a second live job under `name` (the caller skips this with --allow-duplicate)."""
    named = [r for r in registry.records() if r.name == name]
    found = live(named, state_fn, prefilter)
    if found:
        record, state = found[0]
        raise DuplicateName(
            f"name {name!r}: job {record.job_id} of that name is still {state.state}; wait for it, cancel it "
            f"(ddpctl cancel {record.job_id}), choose another name (--set name=...), or submit anyway with "
            "--allow-duplicate"
        )


def resolve(
    registry: Registry,
    ref: str,
    state_fn: StateFn = current_state,
    warn: Warn | None = None,
    prefilter: Prefilter = possibly_live,
) -> JobRecord:
    """A job id, or a name: the running job of that name if there is one, else the newest; said when ambiguous."""
    records = registry.records()
    named = [r for r in records if r.name == ref]
    if not named and not any(r.job_id == ref for r in records):
        task = sweep_task(records, ref)
        if task is not None:
            return task
    if any(r.job_id == ref for r in records) or len(named) < 2:
        return registry.find(ref)  # an id, a unique name, or an unknown one (with "did you mean")
    found = live(named, state_fn, prefilter)
    running = [pair for pair in found if pair[1].state == "RUNNING"]
    chosen, state = running[0] if running else (found[0] if found else (named[-1], None))
    if ambiguous(named[-1], chosen, [record for record, _ in found]):
        what = state.state if state is not None else "newest"
        others = ", ".join(r.job_id for r in reversed(named) if r is not chosen)
        (warn or _stderr)(
            f"ddpctl: name {ref!r} has {len(named)} jobs; using job {chosen.job_id} ({what}); "
            f"give a job id for another: {others}"
        )
    return chosen


def sweep_task(records: list[JobRecord], ref: str) -> JobRecord | None:
    """`NAME_TASK` (the sweep's name or array job id, then the task): that task's record; None when `ref` names
    no sweep; JobNotFound naming the sweep's tasks when it has no such task."""
    tasks, task = named_task(records, ref)
    if tasks and task is None:
        raise JobNotFound(f"job {ref!r}: sweep {tasks[0].name} has no such task; its tasks: {task_list(tasks)}")
    return task


def ambiguous(newest: JobRecord, chosen: JobRecord, live_records: list[JobRecord]) -> bool:
    """Worth a line only when the newest job is not the name's only live one: an older job was chosen, or
    another job of the name is live too. Ended jobs of the same name are history, not a choice (pure)."""
    return chosen is not newest or any(record is not chosen for record in live_records)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
