"""A sweep submitted as one held Slurm job array, prepared, then released.

Every task's run dir is named after the array job's id (`<run_dir>/<name>/<array job>_<task>/`), which exists
only once sbatch returns, and a task must find its point's job.yaml there when it starts. The array is therefore
submitted held (`sbatch --hold`): the run dirs are written under the returned id while no task can start, then
`scontrol release` lets Slurm start them. Why not an unheld array whose tasks wait for their run dirs, as a single
job does (templates/ddp.sbatch.j2 waits up to 60 s)? A sweep writes up to MaxArraySize run dirs, which may take
longer than any fixed wait on a slow shared file system, and a task that gave up would fail its point; held, the
time to prepare costs nothing but the release's scheduling round. And nothing half-prepared can run: a failure
before the release cancels the held array and removes every dir written for it.

The code snapshot is listed and stored once for the sweep, and each task gets its own copy (`code/` in its run
dir, as every run has): one task's writes beside its script (a changed helper module, a leftover file) never
reach another, whatever runs in parallel.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

import yaml

from ddpctl.backends import note_submitted
from ddpctl.backends.slurm import submit as sbatch_submit
from ddpctl.backends.slurm.jobs import SlurmJobs
from ddpctl.errors import CommandError, SpecError
from ddpctl.plan.stopscan import scan_event
from ddpctl.plan.sweep import ArrayPlan
from ddpctl.run import history, tracking
from ddpctl.run.history import RequeueModeChosen
from ddpctl.run.layout import STAGED_TASKS, STAGING, RunLayout, batch_output, sweep_dir
from ddpctl.run.registry import JobRecord
from ddpctl.run.rundir import claim, link_batch_output
from ddpctl.run.sweeps import task_id
from ddpctl.slurm import commands
from ddpctl.snapshot import take_each
from ddpctl.spec import spec_to_mapping

SCRIPT = "array.sbatch"
POINTS = "points.json"


def submit_array(jobs: SlurmJobs, plan: ArrayPlan, spec_path: Path, requeue_why: str) -> list[JobRecord]:
    """Submit the plan's array held, write every task's run dir, release it; the tasks' records. On any failure
    the array is cancelled and nothing written for it is left."""
    spec = plan.sweep.spec
    if plan.script is None:
        raise SpecError(f"{spec.source}: backend {spec.backend}: sweeps are submitted on the sbatch backend only")
    trackers: list[dict[str, object]] = []  # each task's tracker identities (ddpctl.run.tracking)
    stage = staged(plan, trackers)
    try:
        job = sbatch_submit.submit(stage / SCRIPT, spec.name, jobs.runner, jobs.query, extra=["--hold"])
        written: list[Path] = []
        try:
            records = commit(plan, stage, job, spec_path, written)
            scanned = scan_event(spec)
            for record in records:
                events = RunLayout(Path(record.run_dir)).events
                note_submitted(events, record.job_id, jobs.name, spec_path)
                history.append(events, RequeueModeChosen(mode=spec.requeue.mode, why=requeue_why))
                history.append(events, scanned)
            commands.release(job, jobs.runner)
        except (OSError, CommandError, SpecError):
            commands.scancel_unchecked(job, jobs.runner)
            withdraw(trackers)
            for path in reversed(written):
                shutil.rmtree(path, ignore_errors=True)
            for index in range(len(plan.sweep.points)):
                with contextlib.suppress(OSError):
                    batch_output(plan.run_base, task_id(job, index)).unlink()
            raise
    except BaseException:
        withdraw(trackers)  # nothing was submitted (a no-op where the handler above already withdrew them)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # renamed away on success
    return records


def withdraw(trackers: list[dict[str, object]]) -> None:
    """Delete the MLflow runs created for the tasks of a sweep that was not submitted (once)."""
    for record in trackers:
        tracking.withdraw(record)
    trackers.clear()


def staged(plan: ArrayPlan, trackers: list[dict[str, object]]) -> Path:
    """The sweep dir before its name is known: script, points, each task's job.yaml and own code copy."""
    spec = plan.sweep.spec
    stage = spec.run_base / f"{STAGING}{uuid.uuid4().hex[:12]}"
    try:
        stage.mkdir(parents=True)
    except OSError as err:
        raise SpecError(
            f"{spec.source}: run_dir: cannot create a run directory under {spec.run_base}: {err.strerror or err}"
        ) from err
    try:
        if plan.script is not None:  # the local backend's sweep runs no batch script
            (stage / SCRIPT).write_text(plan.script)
        points = {str(point.index): point.overrides for point, _ in plan.sweep.points}
        (stage / POINTS).write_text(json.dumps(points, indent=1) + "\n")
        for point, point_spec in plan.sweep.points:
            task = RunLayout(stage / STAGED_TASKS / str(point.index))
            task.root.mkdir(parents=True)
            task.spec_file.write_text(yaml.safe_dump(spec_to_mapping(point_spec), sort_keys=False))
            if plan.successor is not None:  # requeue.mode chain: what the task's successor job runs
                task.script_file.write_text(plan.successor)
            # Each task is its own tracker run; the sweep's name groups them (W&B's run group).
            trackers.append(tracking.prepare(point_spec, task, os.environ, Path.cwd(), group=spec.name, point=point))
        tasks = [RunLayout(stage / STAGED_TASKS / str(point.index)) for point, _ in plan.sweep.points]
        take_each(spec, [(task.snapshot_file, task.code_dir) for task in tasks])
    except BaseException:
        withdraw(trackers)
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return stage


def commit(
    plan: ArrayPlan, stage: Path, job: str, spec_path: Path, written: list[Path], *, batch_link: bool = True
) -> list[JobRecord]:
    """The staging dir becomes `sweep-<job>`, each task dir `<job>_<task>` (each name claimed by rundir.claim, as a
    single run's commit does); `written` collects what was made, for the caller's clean-up. `batch_link`: link
    each run dir's slurm.out to the file Slurm writes (not for the local backend: its supervisor writes it)."""
    base = plan.run_base
    home = claim(sweep_dir(base, job))
    written.append(home)
    stage.rename(home)
    records = []
    for point, point_spec in plan.sweep.points:
        task = task_id(job, point.index)
        layout = RunLayout(claim(base / task))
        written.append(layout.root)
        (home / STAGED_TASKS / str(point.index)).rename(layout.root)
        if batch_link:
            link_batch_output(layout, point_spec, task)
        records.append(
            JobRecord(
                job_id=task,
                name=point_spec.name,
                run_dir=str(layout.root),
                backend=point_spec.backend,
                submitted_at=time.time(),
                spec_path=str(spec_path),
                sweep=job,
                point=" ".join(point.overrides),
            )
        )
    with contextlib.suppress(OSError):
        (home / STAGED_TASKS).rmdir()
    return records
