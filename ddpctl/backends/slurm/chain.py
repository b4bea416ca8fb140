"""A run on Slurm as one thing, whatever number of jobs it spans (requeue.mode: chain, or a requeue that fell
back to a chained job): which job is current, its state, cancel of all of them (see ddpctl.node.chain).

The registry's job id is the run's id: its first job. Successors are in the run's events (`chain-submit`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from pathlib import Path

from ddpctl.backends.slurm.state import state_from_slurm
from ddpctl.errors import CommandError
from ddpctl.proc import Runner
from ddpctl.run import history
from ddpctl.run.history import RequeueModeChosen, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.slurm import commands


def run_history(record: JobRecord) -> RunHistory:
    return history.load(RunLayout(Path(record.run_dir)).events)


def run_jobs(record: JobRecord, past: RunHistory | None = None) -> list[str]:
    return (past if past is not None else run_history(record)).chain_jobs(record.job_id)


def current_job(record: JobRecord, runner: Runner, past: RunHistory | None = None) -> str:
    """The job that runs the run now: the newest one, unless its predecessor is still running (a successor is
    submitted while its predecessor still checkpoints)."""
    jobs = run_jobs(record, past)
    if len(jobs) == 1:
        return jobs[0]
    row = commands.squeue(jobs[-2], runner)
    # COMPLETING: its batch shell has ended; Slurm may keep it so for minutes around a lost node (ddpctl.node.chain)
    return jobs[-2] if row is not None and row.state not in ("PENDING", "COMPLETING") else jobs[-1]


def chain_state(record: JobRecord, runner: Runner) -> JobState:
    """The run's state: its current job's, said as that job's place in the chain (the history read once)."""
    past = run_history(record)
    jobs = run_jobs(record, past)
    if len(jobs) == 1:
        return state_from_slurm(record, runner, past)
    current = current_job(record, runner, past)
    layout = RunLayout(Path(record.run_dir))
    if layout.cancel_request.exists() and commands.squeue(current, runner) is None:
        return JobState("CANCELLED", past.restarts(), "cancelled with ddpctl cancel")
    state = state_from_slurm(dataclasses.replace(record, job_id=current), runner, past)
    if state.terminal and current != jobs[-1]:
        # The predecessor left the queue between current_job's question and this one: its end (COMPLETED,
        # or CANCELLED by a PreemptMode=CANCEL preemption) is not the run's, since a successor carries it on.
        current = jobs[-1]
        state = state_from_slurm(dataclasses.replace(record, job_id=current), runner, past)
    where = f"job {current}, {jobs.index(current) + 1} of {len(jobs)} in the chain"
    return dataclasses.replace(state, reason=f"{where}; {state.reason}" if state.reason else where)


def chain_mode(record: JobRecord) -> bool:
    """The run was submitted to continue in chained jobs (its recorded requeue mode)."""
    chosen = run_history(record).all(RequeueModeChosen)
    return bool(chosen) and chosen[-1].mode == "chain"


def cancel_run(record: JobRecord, runner: Runner) -> list[str]:
    """Cancel every job of the run, a pending successor included; returns the jobs cancelled."""
    layout = RunLayout(Path(record.run_dir))
    # First: a successor submitted from now on is cancelled by its submitter (ddpctl.node.chain).
    with contextlib.suppress(OSError):  # a run dir removed by hand: its jobs are still cancelled below
        layout.cancel_request.write_text(json.dumps({"t": time.time()}) + "\n")
    cancelled: list[str] = []
    errors: list[CommandError] = []
    for _ in range(2):  # again after the first pass: a successor recorded just before the request is seen now
        for job in run_jobs(record):
            if job in cancelled:
                continue
            try:
                commands.scancel(job, runner=runner)
                cancelled.append(job)
            except CommandError as err:
                errors.append(err)
    if not cancelled and errors:
        raise errors[0]
    return cancelled
