"""requeue.mode: chain — the run continues in a new Slurm job where a job may not requeue itself.

Where `JobRequeue=0`, `PreemptMode=CANCEL`, a denied `scontrol requeue` or a `MaxTime` below the training time
rule out self-requeue, the batch shell submits a successor: the same batch script, the same run dir (its path
and the next attempt number are the script's arguments), `--dependency=afterany:<this job>`. One run, one
run dir, attempts numbered across the chain, budgets counted from the one events.jsonl.

No two jobs of a run can be live: a successor depends on its predecessor with `afterany`, so Slurm starts it
only once the predecessor has ended, whatever its end (completed, cancelled at the end of a preemption grace
time, timed out), and each job submits at most one successor. It is submitted as early as it is known to be
needed — when the warning/preemption signal arrives — so a predecessor cancelled at the end of its grace time,
before its decision, still leaves its successor behind (that attempt is then charged to the signal's kind, as
an attempt Slurm requeued itself is); a `finish` decision cancels it again (`drop_successor`), and a successor
that starts anyway after a finished or cancelled run ends at once (`may_start`).

One successor depends on nothing: the one after an attempt that lost a node (`node-lost`). Slurm keeps that
attempt's job COMPLETING, and every job that depends on it pending, until it gives up on the node
(`SlurmdTimeout`, 300 s by default; a requeue of the job waits as long): tests/cluster/README.md. It is submitted
only by the decision, as the batch shell's last act, after the step has ended, and two jobs of the run still
never train at once: Slurm gives the successor no node the predecessor still holds (its batch host until the shell
has exited, the lost node until Slurm gives up on it) and the successor excludes the lost node.

`ddpctl cancel` writes `cancel-request.json` first and then cancels every job of the chain; `submit_successor`
checks for it before submitting and again after recording its successor (cancelling it when it appeared), so a
successor is either seen by `cancel` or cancelled by its submitter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

from ddpctl import exitcodes
from ddpctl.errors import CommandError
from ddpctl.proc import Runner, run
from ddpctl.run import history
from ddpctl.run.history import ChainDropped, ChainSubmitted, NodeLost, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.slurm import commands
from ddpctl.slurm.env import JOB_ID, attempt_number


def submit_successor(layout: RunLayout, env: Mapping[str, str], why: str, runner: Runner = run) -> str | None:
    """Submit (once per attempt) the job that continues the run after this one; None once it is cancelled."""
    attempt, job_id = attempt_number(env), env.get(JOB_ID, "")
    if layout.cancel_request.exists():
        return None
    past = history.load(layout.events)
    existing = past.successor_of(attempt)
    if existing is not None:
        return existing
    options = [*dependency(past, attempt, job_id), f"--output={layout.batch_log}", "--open-mode=append"]
    if layout.excluded_nodes.exists():  # never back to a bad node; replaces the script's own --exclude: merged
        from ddpctl.node.excluding import run_excluded

        options.append(f"--exclude={','.join(run_excluded(layout))}")
    successor = commands.sbatch(str(layout.script_file), options, runner, args=[str(layout.root), str(attempt + 1)])
    history.append(
        layout.events,
        ChainSubmitted(attempt=attempt, job_id=successor, predecessor=job_id, next_attempt=attempt + 1, why=why),
    )
    if layout.cancel_request.exists():  # `cancel` ran meanwhile and may not have seen the event above
        cancel_quietly(successor, runner)
        history.append(layout.events, ChainDropped(attempt=attempt, job_id=successor, why="run cancelled"))
        return None
    return successor


def dependency(past: RunHistory, attempt: int, job_id: str) -> list[str]:
    """The successor's sbatch dependency on this job: none after a lost node (see the module's docstring)."""
    return [] if past.attempt(attempt).first(NodeLost) is not None else [f"--dependency=afterany:{job_id}"]


def drop_successor(layout: RunLayout, env: Mapping[str, str], why: str, runner: Runner = run) -> str | None:
    """The run ends with this job: cancel the successor submitted at the signal, if any."""
    attempt = attempt_number(env)
    successor = history.load(layout.events).successor_of(attempt)
    if successor is not None:
        cancel_quietly(successor, runner)
        history.append(layout.events, ChainDropped(attempt=attempt, job_id=successor, why=why))
    return successor


@dataclass(frozen=True)
class Refusal:
    """Why a job of the run must not train, and the status it exits with instead."""

    reason: str
    # The run's own final status: Slurm's record of this job (sacct, squeue) then says how the run ended, not
    # COMPLETED for a run that failed. A cancelled run's job did what was asked of it: 0.
    exit_code: int


def may_start(layout: RunLayout, env: Mapping[str, str]) -> Refusal | None:
    """Why this successor (or requeued job) must not train (None: it may): the run was cancelled, or it already
    finished."""
    if layout.cancel_request.exists():
        return Refusal("the run was cancelled", 0)
    finished = history.load(layout.events).finished_before(attempt_number(env))
    if finished is None:
        return None
    code = finished.exit_code
    status = code if code is not None and 0 <= code <= 255 else exitcodes.FAILURE
    return Refusal(f"the run already finished in attempt {finished.attempt} ({finished.reason})", status)


def cancel_quietly(job_id: str, runner: Runner = run) -> None:
    with contextlib.suppress(CommandError):  # already gone: that is what was wanted
        commands.scancel(job_id, runner=runner)
