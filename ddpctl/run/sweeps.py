"""A sweep in the registry (pure): its tasks are records of their own (`<array job>_<task>`, each with its own run
dir, so `status`, `logs`, `cancel` and `preempt` take a task id as any job id) that name their array job in
`sweep`; a sweep is the set of records with one `sweep` value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ddpctl.run.registry import JobRecord
from ddpctl.spec.capabilities import BACKENDS

# A sweep's task id: its array job's id, as the backend that ran the sweep spells it (a Slurm array job 123, a
# local sweep local-7), then the task's index.
_TASK_ID = re.compile("(" + "|".join(sorted({caps.job_ids for caps in BACKENDS.values() if caps.sweeps})) + r")_(\d+)")
_NAMED_TASK = re.compile(r"(.+)_(\d+)")

# The four counts `list` shows for a sweep; every state a task can be in falls into one or is left out (UNKNOWN).
RUNNING = ("RUNNING", "COMPLETING", "UNREACHABLE", "STOPPING")
PENDING = ("PENDING", "REQUEUED", "CONFIGURING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED")
COMPLETED = ("COMPLETED",)


def parse_task_id(text: str) -> tuple[str, int] | None:
    """`123_4` → ("123", 4), `local-7_2` → ("local-7", 2); None for anything else (a plain job id, a name,
    `123_[0-3]`)."""
    match = _TASK_ID.fullmatch(text.strip())
    return (match.group(1), int(match.group(2))) if match else None


def task_id(array_job: str, index: int) -> str:
    return f"{array_job}_{index}"


def sweep_tasks(records: Sequence[JobRecord], ref: str) -> list[JobRecord]:
    """The tasks of the sweep `ref` names, by index: its array job id, or a name (its newest sweep of that name,
    even where a plain job of that name came later: `sweep results NAME` and `logs NAME_3` name a sweep). Empty:
    `ref` is no sweep (a task id is a job, not a sweep)."""
    by_array = [r for r in records if r.sweep == ref]
    if not by_array:
        named = [r for r in records if r.name == ref and r.sweep is not None]
        if not named:
            return []
        by_array = [r for r in records if r.sweep == named[-1].sweep]
    return sorted(by_array, key=_index)


def sweep_first(records: Sequence[JobRecord], ref: str) -> list[JobRecord]:
    """For commands that take a job or a sweep (`status`, `cancel`; `logs` and `top` refuse a sweep): the sweep
    `ref` names where its array job id, or a name whose newest record is a sweep task; a name whose newest job is
    plain is that job, so a sweep never hides a later job either."""
    named = [r for r in records if r.name == ref]
    if named and named[-1].sweep is None and not any(r.sweep == ref for r in records):
        return []
    return sweep_tasks(records, ref)


def named_task(records: Sequence[JobRecord], ref: str) -> tuple[list[JobRecord], JobRecord | None]:
    """`sw_3`: the sweep `sw` names (as `sweep_tasks`) and its task 3 (None: it has no task 3). ([], None): `ref`
    is not `<sweep name or array job>_<task>` of a known sweep. Callers ask this only after `ref` matched no job
    id and no job name, so a job named `lr_2` is that job."""
    match = _NAMED_TASK.fullmatch(ref)
    if match is None:
        return [], None
    tasks = sweep_tasks(records, match.group(1))
    index = int(match.group(2))
    return tasks, next((task for task in tasks if _index(task) == index), None)


def task_list(tasks: Sequence[JobRecord], most: int = 8) -> str:
    """`5_0, 5_1, 5_2 ... 5_9 (10 tasks)`: a sweep's task ids for a line, at most `most` of them (pure)."""
    ids = [task.job_id for task in tasks]
    if len(ids) <= most:
        return ", ".join(ids)
    return f"{', '.join(ids[: most - 1])} ... {ids[-1]} ({len(ids)} tasks)"


def _index(record: JobRecord) -> int:
    parsed = parse_task_id(record.job_id)
    return parsed[1] if parsed else -1


def group(records: Sequence[JobRecord]) -> list[tuple[JobRecord, list[JobRecord]]]:
    """Each plain job as (record, []) and each sweep once, where its first task is, as (first task, its tasks),
    in the records' order: what `list` shows a line for."""
    sweeps: dict[str, list[JobRecord]] = {}
    for record in records:
        if record.sweep is not None:
            sweeps.setdefault(record.sweep, []).append(record)
    out: list[tuple[JobRecord, list[JobRecord]]] = []
    for record in records:
        if record.sweep is None:
            out.append((record, []))
        elif sweeps[record.sweep][0] is record:
            out.append((record, sorted(sweeps[record.sweep], key=_index)))
    return out


def counts(states: Iterable[str]) -> dict[str, int]:
    """Tasks per group: running, pending, completed, failed (every other ended state: FAILED, CANCELLED,
    TIMEOUT, BUDGET_SPENT, ...); an unknown state is counted in none."""
    out = {"running": 0, "pending": 0, "completed": 0, "failed": 0}
    for state in states:
        if state in RUNNING:
            out["running"] += 1
        elif state in PENDING:
            out["pending"] += 1
        elif state in COMPLETED:
            out["completed"] += 1
        elif state not in ("UNKNOWN", "", "-"):
            out["failed"] += 1
    return out


def count_line(states: Sequence[str]) -> str:
    """`4 tasks: 1 running / 2 pending / 1 completed / 0 failed`: a sweep's state on its `list` line."""
    c = counts(states)
    noun = "task" if len(states) == 1 else "tasks"
    return (
        f"{len(states)} {noun}: {c['running']} running / {c['pending']} pending / {c['completed']} completed / "
        f"{c['failed']} failed"
    )
