"""A job's state from what is cheap and always there: squeue, then scontrol, then the run's own events.

No sacct needed (many clusters run without accounting), and a requeued or preempted job is shown as such,
never as failed.
"""

from __future__ import annotations

import time
from pathlib import Path

from ddpctl.proc import Runner
from ddpctl.run import history
from ddpctl.run.history import RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.slurm import commands


def display_state(state: str, restarts: int) -> str:
    if state == "PENDING" and restarts > 0:
        return "REQUEUED"
    return state


def without_controller(past: RunHistory, detail: str) -> JobState:
    """The state from the run dir alone, for when the controller does not answer (never UNKNOWN for a job that
    is training): its recorded end if it has one, else UNREACHABLE with its last attempt, said as such."""
    ended = past.final_state()
    if ended is not None and ended.state != "REQUEUED":
        return ended
    since = commands.OUTAGE.since
    when = time.strftime("%H:%M:%S", time.localtime(since)) if since else "now"
    started = [n for n in past.attempts if past.started(n)]
    last = f"attempt {started[-1]} started, no end recorded" if started else "no attempt started yet"
    reason = f"Slurm controller not answering since {when} ({detail}); from the run dir: {last}"
    return JobState("UNREACHABLE", past.restarts(), reason)


def state_from_slurm(record: JobRecord, runner: Runner, past: RunHistory | None = None) -> JobState:
    """`past`: the run's history as the caller read it for this poll (read here when None). ControllerUnreachable
    when Slurm does not answer (SlurmJobs.state turns it into `without_controller`)."""
    events = RunLayout(Path(record.run_dir)).events
    row = commands.squeue(record.job_id, runner)
    if row is not None:
        restarts = (past if past is not None else history.load(events)).restarts()
        reason = "" if row.reason in ("None", "(null)") else row.reason
        return JobState(display_state(row.state, restarts), restarts, reason, row.nodes, row.elapsed)
    # Gone from the queue: its batch shell has recorded its decision by now, maybe after `past` was read.
    past = history.load(events)
    restarts = past.restarts()
    from_events = past.final_state()
    info = commands.show_job(record.job_id, runner)
    slurm_state = info.get("JobState", "")
    if slurm_state in ("CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "DEADLINE", "BOOT_FAIL"):
        reason = "" if info.get("Reason", "") in ("None", "(null)") else info.get("Reason", "")  # not "(None)"
        return JobState(
            slurm_state, restarts, reason, info.get("NodeList", ""), info.get("RunTime", ""), exit_code=exit_of(info)
        )
    if from_events is not None and from_events.state != "REQUEUED":
        return from_events
    if slurm_state:
        return JobState(
            display_state(slurm_state, restarts),
            restarts,
            info.get("Reason", ""),
            info.get("NodeList", ""),
            info.get("RunTime", ""),
            exit_code=exit_of(info),
        )
    return from_events or JobState("UNKNOWN", restarts, "not in squeue or scontrol; no decision recorded")


def exit_of(info: dict[str, str]) -> int | None:
    code = info.get("ExitCode", "")
    head = code.split(":")[0]
    return int(head) if head.isdigit() else None
