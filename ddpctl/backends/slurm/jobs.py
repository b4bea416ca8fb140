"""What the backends that submit to Slurm share once a job exists: its state, cancel, and preempt, a sweep's
tasks' states (one squeue call per array) and whether a job may still run (`prune`)."""

from __future__ import annotations

from pathlib import Path

from ddpctl import proc
from ddpctl.backends import current_state
from ddpctl.backends.slurm.chain import cancel_run, chain_state, current_job, run_history
from ddpctl.backends.slurm.state import without_controller
from ddpctl.errors import BackendUnavailable, CommandError, ControllerUnreachable
from ddpctl.node import batch
from ddpctl.run import history
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.rundir import run_spec
from ddpctl.run.state import JobState
from ddpctl.slurm import commands


class SlurmJobs:
    # How Slurm delivers this backend's warning signal, which `preempt` imitates: ("--batch",) for a
    # `--signal=B:` job (the batch shell); () for `--signal=` without B: (every step task).
    preempt_delivery: tuple[str, ...] = ()
    name = ""  # each backend's own

    def require_commands(self, *names: str) -> None:
        """The Slurm client commands this backend runs must be on PATH (a login node has them)."""
        if all(proc.available(name) for name in names):
            return
        what = f"the {names[0]} command is" if len(names) == 1 else f"{'/'.join(names)} are"
        raise BackendUnavailable(
            f"backend {self.name}: {what} not on PATH (not a Slurm login node?); run without Slurm with --backend local"
        )

    def __init__(self, runner: proc.Runner | None = None) -> None:
        self.runner = runner or proc.run  # commands that change something: Slurm's own timeouts and retries
        self.query = runner or commands.bounded  # questions a person at a terminal waits for

    def state(self, record: JobRecord) -> JobState:
        try:
            return chain_state(record, self.query)  # the run's state, across a chain of jobs
        except ControllerUnreachable as err:
            return without_controller(run_history(record), str(err))

    def cancel(self, record: JobRecord) -> None:
        cancel_run(record, self.runner)  # every job of the run, a pending chained successor included

    def sweep_task_states(self, records: list[JobRecord]) -> list[str]:
        return array_task_states(records)

    def live_ids(self, records: list[JobRecord]) -> set[str]:
        """Those squeue may still list (one call for all); all of them when it cannot answer."""
        from ddpctl.backends.names import possibly_live

        return {record.job_id for record in possibly_live(records)}

    def holds_run(self, run_dir: Path) -> bool:
        """Nothing on this host holds a Slurm job's run dir: squeue (`live_ids`) says whether it runs."""
        return False

    def preempt(self, record: JobRecord, kind: str) -> None:
        layout = RunLayout(Path(record.run_dir))
        spec = run_spec(layout)
        batch.request_kind(layout, kind)
        try:
            job = current_job(record, self.runner)  # of a chained run: the job running it now
            commands.scancel(job, *self.preempt_delivery, f"--signal={spec.requeue.signal}", runner=self.runner)
        except CommandError:
            # Not delivered (e.g. the job is pending): a request left behind would relabel the next real signal.
            layout.preempt_request.unlink(missing_ok=True)
            raise


def array_task_states(records: list[JobRecord]) -> list[str]:
    """Each task's state of one job array (by the records' order): one squeue call for the array's queued and
    running tasks; an ended task's from its run's recorded end, else its own state query."""
    array_job = records[0].sweep if records else None
    if array_job is None:
        return []
    try:
        rows = commands.array_tasks(array_job)
    except ControllerUnreachable:
        rows = None
    listed = {row.job_id: row.state for row in rows or []}
    states = []
    for record in records:
        if record.job_id in listed:
            states.append(listed[record.job_id])
            continue
        ended = history.load(RunLayout(Path(record.run_dir)).events).final_state()
        if rows is not None and ended is not None and ended.state != "REQUEUED":
            states.append(ended.state)
        else:
            states.append(current_state(record).state)
    return states
