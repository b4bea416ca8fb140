"""A sweep on the local backend: its side effects, all here (the decisions are ddpctl.run.sweepqueue's).

`submit` writes the sweep as the sbatch backend does (`<run_dir>/<name>/sweep-local-N/` for the sweep, each
task's run dir `<run_dir>/<name>/local-N_<task>/` with its point's job.yaml and own code copy, a registry
record per task), then starts one detached queue process (`ddpctl internal local-sweep`, its own session, like a
job's supervisor) and returns. The queue starts each task as an ordinary local job (its own supervisor) when a slot
is free and exits once no task waits; nothing of ddpctl stays in the user's terminal.

The sweep dir plays a run dir for the queue: its `supervisor.lock` is held while the queue lives (taken by
`submit`, handed over, dropped by the kernel however it ends), so "the queue is gone" is known, not guessed.
Every start and every cancel happens under the sweep dir's `queue.decide` flock: a task cancelled before its
turn (or a sweep cancelled, the `cancelled` marker) is never started after.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ddpctl import safeio
from ddpctl.backends import note_submitted
from ddpctl.backends.local import processes as local_proc
from ddpctl.backends.local.queue import CANCELLED, deciding, sweep_home, view
from ddpctl.backends.slurm import array as sbatch_array
from ddpctl.errors import DdpctlError, SpecError
from ddpctl.plan.stopscan import scan_event
from ddpctl.plan.sweep import ArrayPlan
from ddpctl.run import history, sweepqueue
from ddpctl.run.history import RequeueModeChosen
from ddpctl.run.layout import SWEEP_DIR, RunLayout
from ddpctl.run.registry import JobRecord, Registry

QUEUE_LOG = "queue.log"
POLL_S = 0.5


def check_size(name: str, count: int) -> None:
    if count > sweepqueue.LOCAL_MAX_POINTS:
        raise SpecError(
            f"sweep {name}: {count} points, but the local backend runs at most {sweepqueue.LOCAL_MAX_POINTS} "
            "points per sweep (each a full run on this machine): use fewer values, split it, or the sbatch backend"
        )


def submit(
    plan: ArrayPlan,
    spec_path: Path,
    requeue_why: str,
    add_records: Callable[[list[JobRecord]], None],
    *,
    backend: str,
) -> list[JobRecord]:
    """Write the sweep's dirs, add the tasks' records (the registry's `add_all`), then start the detached
    queue; the tasks' records. A failure before they are recorded leaves nothing written; a queue that then
    fails to start leaves recorded tasks that say "never started" (ddpctl.run.sweepqueue.unstarted_state)."""
    spec = plan.sweep.spec
    check_size(spec.name, len(plan.sweep.points))
    trackers: list[dict[str, object]] = []
    stage = sbatch_array.staged(plan, trackers)
    written: list[Path] = []
    try:
        number = local_proc.next_job_number(Registry.from_env().path.parent)
        sweep_id = f"local-{number}"
        records = sbatch_array.commit(plan, stage, sweep_id, spec_path, written, batch_link=False)
        scanned = scan_event(spec)
        for record in records:
            events = RunLayout(Path(record.run_dir)).events
            note_submitted(events, record.job_id, backend, spec_path)
            history.append(events, RequeueModeChosen(mode=spec.requeue.mode, why=requeue_why))
            history.append(events, scanned)
        add_records(records)  # before the queue starts: no task runs unrecorded
    except BaseException:
        sbatch_array.withdraw(trackers)
        for path in reversed(written):
            shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # renamed away on success
    start_queue(written[0], number, plan.sweep.axes.max_parallel)
    return records


def start_queue(home: Path, number: int, max_parallel: int | None) -> int:
    """Start the detached queue of sweep dir `home`, its lock taken here and handed over (as a supervisor's)."""
    parallel = ["--max-parallel", str(max_parallel)] if max_parallel is not None else []
    words = ["local-sweep", str(home), "--job-number", str(number), *parallel]
    return local_proc.spawn_holding_lock(home, home / QUEUE_LOG, words)


def task_dirs(home: Path) -> list[Path]:
    points = safeio.read_json(home / sbatch_array.POINTS) or {}
    sweep_id = home.name.removeprefix(SWEEP_DIR)
    return [home.parent / f"{sweep_id}_{index}" for index in range(len(points))]


def serve(home: Path, number: int, max_parallel: int | None) -> int:
    """The queue's loop: start tasks as slots free up, until none waits or the sweep is cancelled."""
    dirs = task_dirs(home)
    while True:
        with deciding(home):
            if (home / CANCELLED).exists():
                print("ddpctl local sweep: cancelled; no further task starts", flush=True)
                return 0
            views = [view(run_dir) for run_dir in dirs]
            for index in sweepqueue.to_start(views, max_parallel):
                layout = RunLayout(dirs[index])
                pid = local_proc.start_supervisor(layout.root, layout.batch_log, number)
                print(f"ddpctl local sweep: task {index} started (supervisor {pid})", flush=True)
                views[index] = sweepqueue.RUNNING
            if sweepqueue.done(views):
                print("ddpctl local sweep: every task started; the queue ends", flush=True)
                return 0
        time.sleep(POLL_S)


def cancel_sweep(records: list[JobRecord], cancel: Callable[[JobRecord], None]) -> None:
    """No further task starts (the marker, under the decision lock), then each running task is cancelled as a
    local job is (`cancel`: the local backend's)."""
    home = sweep_home(records[0])
    with deciding(home):
        safeio.touch(home / CANCELLED)
    for record in records:
        with contextlib.suppress(DdpctlError):
            if local_proc.lock_held(Path(record.run_dir)):
                cancel(record)
