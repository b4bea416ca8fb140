"""What the backends that submit to Slurm share once a job exists: its state, cancel, and preempt."""

from __future__ import annotations

from pathlib import Path

from ddpctl import proc
from ddpctl.backends.slurm_state import state_from_slurm
from ddpctl.errors import CommandError
from ddpctl.node import batch
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.rundir import run_spec
from ddpctl.run.state import JobState
from ddpctl.slurm import commands


class SlurmJobs:
    # How Slurm delivers this backend's warning signal, which `preempt` imitates: ("--batch",) for a
    # `--signal=B:` job (the batch shell); () for `--signal=` without B: (every step task).
    preempt_delivery: tuple[str, ...] = ()

    def __init__(self, runner: proc.Runner = proc.run) -> None:
        self.runner = runner

    def state(self, record: JobRecord) -> JobState:
        return state_from_slurm(record, self.runner)

    def cancel(self, record: JobRecord) -> None:
        commands.scancel(record.job_id, runner=self.runner)

    def preempt(self, record: JobRecord, kind: str) -> None:
        layout = RunLayout(Path(record.run_dir))
        spec = run_spec(layout)
        batch.request_kind(layout, kind)
        try:
            commands.scancel(record.job_id, *self.preempt_delivery, f"--signal={spec.requeue.signal}",
                             runner=self.runner)
        except CommandError:
            # Not delivered (e.g. the job is pending): a request left behind would relabel the next real signal.
            layout.preempt_request.unlink(missing_ok=True)
            raise
