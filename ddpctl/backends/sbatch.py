"""The default backend: our own rendered batch script, submitted with sbatch."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ddpctl import proc
from ddpctl.errors import BackendUnavailable, CommandError
from ddpctl.events import append_event
from ddpctl.layout import RunLayout
from ddpctl.registry import JobRecord
from ddpctl.render import RenderInputs, render_script
from ddpctl.rundir import commit, staging
from ddpctl.slurm import commands
from ddpctl.spec import JobSpec, load_spec
from ddpctl.state import JobState
from ddpctl.status_sources import state_from_slurm


def render_for(spec: JobSpec) -> str:
    return render_script(spec, RenderInputs(run_base=spec.run_base.resolve(), python=spec.python or sys.executable))


class SbatchBackend:
    name = "sbatch"

    def __init__(self, runner: proc.Runner = proc.run) -> None:
        self.runner = runner

    def check_available(self) -> None:
        if not proc.available("sbatch"):
            raise BackendUnavailable(
                "backend sbatch: the sbatch command is not on PATH (not a Slurm login node?); "
                "run without Slurm with --backend local")

    def submit(self, spec: JobSpec, spec_path: Path) -> JobRecord:
        self.check_available()
        with staging(spec, render_for(spec)) as stage:
            # Held until the run dir carries the job id: the script's --output path lives inside it.
            job_id = commands.sbatch(str(stage.script_file), ["--hold"], self.runner)
            try:
                layout = commit(stage, spec, job_id)
                commands.release(job_id, self.runner)
            except (OSError, CommandError):
                self.runner(["scancel", job_id])
                raise
        record = JobRecord(job_id=job_id, name=spec.name, run_dir=str(layout.root), backend=self.name,
                           submitted_at=time.time(), spec_path=str(spec_path))
        append_event(layout.events, "submit", job_id=job_id, backend=self.name, spec=str(spec_path))
        return record

    def state(self, record: JobRecord) -> JobState:
        return state_from_slurm(record, self.runner)

    def cancel(self, record: JobRecord) -> None:
        commands.scancel(record.job_id, runner=self.runner)

    def preempt(self, record: JobRecord, kind: str) -> None:
        layout = RunLayout(Path(record.run_dir))
        spec = load_spec(layout.spec_file, check_paths=False)
        layout.preempt_request.write_text(json.dumps({"kind": kind, "t": time.time()}))
        # Exactly how Slurm delivers the B: warning signal and the preemption user signal: to the batch shell.
        commands.scancel(record.job_id, "--batch", f"--signal={spec.requeue.signal}", runner=self.runner)


BACKEND = SbatchBackend()
