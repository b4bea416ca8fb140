"""Local backend: N simulated nodes on this machine, no Slurm needed.

`submit` starts a detached supervisor (`ddpctl internal local-run RUN_DIR`) that plays the batch shell: it
gives each node's `ddpctl launch` the environment a real step would have, fans the stop signal out, asks the
same requeue decision as on Slurm, and starts the next attempt itself.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ddpctl import proc, safeio, sanitize
from ddpctl.backends import note_submitted, submitted_record
from ddpctl.backends.local import processes as local_proc
from ddpctl.backends.local import queue as local_queue
from ddpctl.errors import CommandError
from ddpctl.node import batch
from ddpctl.run import history
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.rundir import RunDirTaken, commit, run_spec, staging
from ddpctl.run.state import JobState
from ddpctl.spec import capabilities

if TYPE_CHECKING:  # `status` and `cancel` need no plan
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.spec import JobSpec
    from ddpctl.spec.sweepload import Sweep as LoadedSweep


CANCEL_WAIT_S = 30.0  # how long `cancel` waits for a local job's nodes to go
MAX_CLAIMS = 20  # fresh numbers tried for one submit when run dirs of another registry are in the way
LOCAL_ID = re.compile(r"^local-(\d+)$")


def highest_local(run_base: Path) -> int:
    """The highest local job number with a run dir under `run_base` (0: none)."""
    try:
        names = [entry.name for entry in os.scandir(run_base)]
    except OSError:
        return 0
    return max((int(m.group(1)) for name in names if (m := LOCAL_ID.match(name))), default=0)


def claim_run_dir(stage: RunLayout, spec: JobSpec, home: Path) -> tuple[int, RunLayout]:
    """Take this registry's next job number and commit the run dir under it. Job numbers are counted per
    registry, so another DDPCTL_HOME sharing the run_dir may hold that name: then jump past its numbers.
    Numbers are taken only here, after staging succeeded: a failed submit uses none up."""
    at_least = 0
    for _ in range(MAX_CLAIMS):
        number = local_proc.next_job_number(home, at_least)
        try:
            return number, commit(stage, spec, f"local-{number}")
        except RunDirTaken:
            at_least = highest_local(spec.run_base) + 1
    raise RunDirTaken(f"run_dir {spec.run_base}: no free local job number after {MAX_CLAIMS} tries")


class LocalBackend:
    capabilities = capabilities.of("local")  # its row of the one table
    name = capabilities.name

    def check_available(self) -> None:
        """Always available: it needs nothing but this machine."""

    def submit(self, plan: SubmissionPlan, spec_path: Path) -> JobRecord:
        """Commit the run dir and start the detached supervisor that runs the plan's nodes."""
        spec = plan.spec
        with staging(spec, None) as stage:
            number, layout = claim_run_dir(stage, spec, Registry.from_env().path.parent)
        job_id = layout.root.name
        note_submitted(layout.events, job_id, self.name, spec_path)
        pid = local_proc.start_supervisor(layout.root, layout.batch_log, number)
        return submitted_record(layout, spec, job_id, self.name, spec_path, pid=pid)

    def state(self, record: JobRecord) -> JobState:
        run_dir = Path(record.run_dir)
        running = local_proc.lock_held(run_dir)
        # Read once, after the lock: a supervisor records its decision before it lets go of the lock.
        past = history.load(RunLayout(run_dir).events)
        restarts = past.restarts()
        if not running and record.sweep is not None and (unstarted := local_queue.unstarted_state(record)):
            return JobState(unstarted[0], restarts, unstarted[1])  # a sweep's task before its turn
        if running:
            if local_proc.supervisor(run_dir) is None:
                return JobState(
                    "RUNNING",
                    restarts,
                    "stopping: its supervisor is gone, its nodes are shutting down",
                    nodes=nodes_of(run_dir),
                )
            return JobState("RUNNING", restarts, nodes=nodes_of(run_dir))
        if past.cancelled():
            return JobState("CANCELLED", restarts)
        return past.final_state() or JobState("FAILED", restarts, ended_undecided(RunLayout(run_dir).batch_log))

    def cancel(self, record: JobRecord) -> None:
        if record.sweep is not None and local_queue.cancel_unstarted(record):
            return  # a sweep's task before its turn: it never starts
        if not local_proc.signal_supervisor(Path(record.run_dir), signal.SIGTERM):
            raise CommandError(f"job {record.job_id} is not running{_stopping(record)}")
        # As squeue stops listing a job scancel ended: `status` right after `cancel` must not say RUNNING. The
        # supervisor stops its nodes and records the cancel, then lets go of the lock (bounded: a node that
        # ignores SIGTERM is the supervisor's to kill; `status` then says "stopping").
        deadline = time.monotonic() + CANCEL_WAIT_S
        while local_proc.lock_held(Path(record.run_dir)) and time.monotonic() < deadline:
            time.sleep(0.05)

    def preempt(self, record: JobRecord, kind: str) -> None:
        layout = RunLayout(Path(record.run_dir))
        spec = run_spec(layout)
        if local_proc.supervisor(layout.root) is None:
            raise CommandError(f"job {record.job_id} is not running{_stopping(record)}")
        batch.request_kind(layout, kind)
        if not local_proc.signal_supervisor(layout.root, proc.signal_named(spec.requeue.signal)):
            raise CommandError(f"job {record.job_id} is not running{_stopping(record)}")

    # A sweep is a detached queue on this machine that starts each task as a local job (ddpctl.backends.local.sweep).
    sweep_kind = "local queue"

    def check_sweep(self, name: str, tasks: int) -> None:
        from ddpctl.backends.local.sweep import check_size

        check_size(name, tasks)

    def submit_sweep(
        self, loaded: LoadedSweep, spec_path: Path, add_records: Callable[[list[JobRecord]], None]
    ) -> list[JobRecord]:
        """The sweep's run dirs and its detached queue; the tasks are recorded before the queue starts."""
        from ddpctl.backends.local import sweep as local_sweep
        from ddpctl.plan.sweep import plan_sweep, with_requeue_mode
        from ddpctl.slurm.cluster import ClusterFacts

        loaded, why = with_requeue_mode(loaded, ClusterFacts())  # no cluster: the local supervisor's own mode
        return local_sweep.submit(plan_sweep(loaded), spec_path, why, add_records, backend=self.name)

    def sweep_task_states(self, records: list[JobRecord]) -> list[str]:
        """No squeue: each task's own state (its queue's, before it starts)."""
        return [self.state(record).state for record in records]

    def cancel_sweep(self, array_job: str, records: list[JobRecord]) -> None:
        from ddpctl.backends.local.sweep import cancel_sweep

        cancel_sweep(records, self.cancel)

    def live_ids(self, records: list[JobRecord]) -> set[str]:
        """A local job runs while its run dir's lock is held. A sweep's task its queue has not started yet is
        live while the queue is (its sweep dir's lock held): the queue starts it later, and one started
        unrecorded would be invisible to `list`, `status` and `cancel`."""
        return {record.job_id for record in records if local_queue.live(record)}

    def holds_run(self, run_dir: Path) -> bool:
        """Its supervisor (or a launcher it left) holds the run dir's lock."""
        return local_proc.lock_held(run_dir)


def _stopping(record: JobRecord) -> str:
    if local_proc.lock_held(Path(record.run_dir)):
        return " (its supervisor is gone; its nodes are shutting down by themselves)"
    return ""


def ended_undecided(batch_log: Path) -> str:
    """Why a run whose supervisor recorded no decision failed: the last line it (or a launcher, which shares its
    output) wrote, e.g. the ImportError of an interpreter that could not start; "killed?" when it wrote none."""
    lines = (safeio.read_bounded(batch_log, 4096, tail=True) or b"").decode(errors="replace").splitlines()
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    if not last:
        return "its supervisor ended without a decision (killed?); its nodes were stopped with it"
    return f"its supervisor ended without a decision: {sanitize.visible(last[:300])} (see {batch_log})"


def nodes_of(run_dir: Path) -> str:
    try:
        spec = run_spec(RunLayout(run_dir))
    except Exception:
        return ""
    return ",".join(f"local{i + 1}" for i in range(spec.nodes))


BACKEND = LocalBackend()
