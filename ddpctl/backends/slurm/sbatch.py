"""The default backend: our own rendered batch script, submitted with sbatch."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ddpctl.backends import note_submitted, submitted_record
from ddpctl.backends.slurm import array as sbatch_array
from ddpctl.backends.slurm import submit as sbatch_submit
from ddpctl.backends.slurm.chain import cancel_run, chain_mode
from ddpctl.backends.slurm.jobs import SlurmJobs
from ddpctl.errors import CommandError
from ddpctl.run.layout import batch_output
from ddpctl.run.registry import JobRecord
from ddpctl.run.rundir import commit, link_batch_output, staging
from ddpctl.slurm import commands
from ddpctl.spec import capabilities

if TYPE_CHECKING:  # `status` and `cancel` need no plan
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.spec.sweepload import Sweep as LoadedSweep


class SbatchBackend(SlurmJobs):
    capabilities = capabilities.of("sbatch")  # its row of the one table
    name = capabilities.name
    preempt_delivery = ("--batch",)  # the template uses --signal=B:, so Slurm signals the batch shell

    def check_available(self) -> None:
        self.require_commands("sbatch")

    def submit(self, plan: SubmissionPlan, spec_path: Path) -> JobRecord:
        """Submit `plan.script` as it is, then commit the run dir (rename it to the job id)."""
        self.check_available()
        spec = plan.spec
        if plan.script is None:
            raise ValueError(f"backend sbatch: a {plan.backend} plan has no batch script")
        with staging(spec, plan.script) as stage:
            # Not held (a held job's release costs the start a scheduling round trip): a job that starts before
            # the commit below writes to its --output beside the run dirs and its batch script waits for the run
            # dir (templates/ddp.sbatch.j2).
            job_id = sbatch_submit.submit(stage.script_file, spec.name, self.runner, self.query)
            try:
                layout = commit(stage, spec, job_id)
                link_batch_output(layout, spec, job_id)
            except OSError:
                commands.scancel_unchecked(job_id, self.runner)
                with contextlib.suppress(OSError):  # the output of a job that had already started
                    batch_output(spec.run_base, job_id).unlink()
                raise
        record = submitted_record(layout, spec, job_id, self.name, spec_path)
        note_submitted(layout.events, job_id, self.name, spec_path)
        return record

    sweep_kind = "job array"  # one held job array of the batch script (ddpctl.backends.slurm.array)

    def check_sweep(self, name: str, tasks: int) -> None:
        """Nothing to refuse yet: the array's size is checked against the cluster's MaxArraySize on submit."""

    def submit_sweep(
        self, loaded: LoadedSweep, spec_path: Path, add_records: Callable[[list[JobRecord]], None]
    ) -> list[JobRecord]:
        """Plan the sweep for this cluster (requeue mode, MaxArraySize), submit the held array, record its
        tasks."""
        from ddpctl.plan.sweep import check_array_size, plan_sweep, with_requeue_mode
        from ddpctl.slurm.cluster import gather_here

        facts = gather_here()
        loaded, why = with_requeue_mode(loaded, facts)
        plan = plan_sweep(loaded)
        check_array_size(loaded.spec.name, len(loaded.points), facts.max_array_size)
        self.check_available()
        records = sbatch_array.submit_array(self, plan, spec_path, why)
        add_records(records)
        return records

    def cancel_sweep(self, array_job: str, records: list[JobRecord]) -> None:
        self.cancel_array(array_job, records)

    def cancel_array(self, array_job: str, tasks: Sequence[JobRecord] = ()) -> None:
        """End every task of a sweep's job array, pending or running (one scancel of the array job), and every
        job a chained task (requeue.mode chain) continues in outside the array, as a run's cancel does."""
        self.require_commands("scancel")
        chained = [task for task in tasks if chain_mode(task)]
        for task in chained:
            with contextlib.suppress(CommandError):  # a task whose jobs all ended: the array's scancel says
                cancel_run(task, self.runner)
        try:
            commands.scancel(array_job, runner=self.runner)
        except CommandError:
            if not chained:
                raise  # else the array's tasks may all have ended, and their successors are cancelled above


BACKEND = SbatchBackend()
