"""ddpctl: run PyTorch DDP training on Slurm and keep it running.

The data flows through one package per concern, each importing only from those before it:

    spec/          YAML + --set  ->  a checked, frozen JobSpec; the backends' capability table
    slurm/         Slurm's variables, hostlists and commands (sbatch, squeue, scontrol, scancel) behind one Runner
    snapshot/      the code a run executes: collected, stored once, copied into its run dir
    run/           the run directory contract: layout, the run's history (events.jsonl), registry, JobState
    runtime/       the training side (torch): init, Checkpointer, StopAgreement, resume
    integrations/  the trainers people bring (Lightning, Hugging Face): their stop, checkpoint and resume
    health/        progress records; hang, stall and straggler verdicts; a sweep's results; the node watchdog
    node/          the cluster side (torch-free): batch-shell decisions, launch, torchrun argv/env, worker
    plan/          spec -> the frozen SubmissionPlan (batch script or executor parameters + each node's argv/env)
    backends/      sbatch, submitit, local: submit a plan or a sweep; state, cancel, preempt a job
    logs/          find, merge, filter and follow the ranks' logs
    remote/        remote clusters over SSH: profiles, the ssh command line, the transport
    api/           the Python API below (the Job handle in api/handle), which the command line is built on
    cli/           one thin module per `ddpctl` command

The Python API is available here without importing anything heavy until it is used:
`ddpctl.load_spec`, `ddpctl.submit`, `ddpctl.sweep`, `ddpctl.job`, `ddpctl.jobs`, `ddpctl.Job`, `ddpctl.Sweep`,
`ddpctl.LogLine`
(see `ddpctl.api`, which also has `plan`, the dry run), and the typed errors of `ddpctl.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ddpctl.api import Job, LogLine, Sweep, job, jobs, load_spec, submit, sweep
    from ddpctl.errors import (
        ArgumentError,
        BackendUnavailable,
        CommandError,
        DdpctlError,
        JobNotFound,
        LogsError,
        SpecError,
        WaitTimeout,
    )

_API = ("Job", "LogLine", "Sweep", "job", "jobs", "load_spec", "submit", "sweep")
_ERRORS = (
    "ArgumentError",
    "BackendUnavailable",
    "CommandError",
    "DdpctlError",
    "JobNotFound",
    "LogsError",
    "SpecError",
    "WaitTimeout",
)
__all__ = [
    "ArgumentError",
    "BackendUnavailable",
    "CommandError",
    "DdpctlError",
    "Job",
    "JobNotFound",
    "LogLine",
    "LogsError",
    "SpecError",
    "Sweep",
    "WaitTimeout",
    "__version__",
    "job",
    "jobs",
    "load_spec",
    "submit",
    "sweep",
]


def __getattr__(name: str) -> Any:
    """Import the API on first use: `ddpctl --help` and the node side must not pay for it."""
    if name in _API:
        from ddpctl import api

        return getattr(api, name)
    if name in _ERRORS:
        from ddpctl import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'ddpctl' has no attribute {name!r}")
