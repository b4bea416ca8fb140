"""The default backend: our own rendered batch script, submitted with sbatch."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ddpctl import proc
from ddpctl.backends.slurm_jobs import SlurmJobs
from ddpctl.errors import BackendUnavailable, CommandError
from ddpctl.run.events import append_event
from ddpctl.run.registry import JobRecord
from ddpctl.run.rundir import commit, staging
from ddpctl.slurm import commands

if TYPE_CHECKING:  # `status` and `cancel` need no plan
    from ddpctl.plan.submission import SubmissionPlan


class SbatchBackend(SlurmJobs):
    name = "sbatch"
    preempt_delivery = ("--batch",)  # the template uses --signal=B:, so Slurm signals the batch shell

    def check_available(self) -> None:
        if not proc.available("sbatch"):
            raise BackendUnavailable(
                "backend sbatch: the sbatch command is not on PATH (not a Slurm login node?); "
                "run without Slurm with --backend local"
            )

    def submit(self, plan: SubmissionPlan, spec_path: Path) -> JobRecord:
        """Submit `plan.script` as it is (held), commit the run dir, release the job."""
        self.check_available()
        spec = plan.spec
        if plan.script is None:
            raise ValueError(f"backend sbatch: a {plan.backend} plan has no batch script")
        with staging(spec, plan.script) as stage:
            # Held until the run dir carries the job id: the script's --output path lives inside it.
            job_id = commands.sbatch(str(stage.script_file), ["--hold"], self.runner)
            try:
                layout = commit(stage, spec, job_id)
                commands.release(job_id, self.runner)
            except (OSError, CommandError):
                commands.scancel_unchecked(job_id, self.runner)
                raise
        record = JobRecord(
            job_id=job_id,
            name=spec.name,
            run_dir=str(layout.root),
            backend=self.name,
            submitted_at=time.time(),
            spec_path=str(spec_path),
        )
        append_event(layout.events, "submit", job_id=job_id, backend=self.name, spec=str(spec_path))
        return record


BACKEND = SbatchBackend()
