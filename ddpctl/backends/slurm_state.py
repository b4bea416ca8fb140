"""A job's state from what is cheap and always there: squeue, then scontrol, then the run's own events.

No sacct needed (many clusters run without accounting), and a requeued or preempted job is shown as such,
never as failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddpctl import exitcodes
from ddpctl.proc import Runner
from ddpctl.run.events import read_events
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.slurm import commands


def restarts_in(events: list[dict[str, Any]]) -> int:
    """Restarts so far: the newest attempt started, or one past an attempt whose decision was to requeue (the
    job is then in its requeue hold and the next attempt has not written anything yet)."""
    restarts = 0
    for event in events:
        attempt = event.get("attempt")
        if not isinstance(attempt, int):
            continue
        if event.get("event") == "attempt-start":
            restarts = max(restarts, attempt)
        elif event.get("event") == "decision" and event.get("action") == "requeue":
            restarts = max(restarts, attempt + 1)
    return restarts


def run_events(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_events(RunLayout(run_dir).events))


def restarts_from_events(run_dir: Path) -> int:
    return restarts_in(run_events(run_dir))


def state_from_events(run_dir: Path) -> JobState | None:
    return final_state_in(run_events(run_dir))


def final_state_in(events: list[dict[str, Any]]) -> JobState | None:
    """The final state recorded by the batch shell's last decision, if the job got that far (pure)."""
    decisions = [e for e in events if e.get("event") == "decision"]
    if not decisions:
        return None
    last = decisions[-1]
    restarts = restarts_in(events)
    code = last.get("exit_code")
    if last.get("action") == "requeue":
        return JobState("REQUEUED", restarts, str(last.get("reason", "")))
    if code == exitcodes.OK:
        return JobState("COMPLETED", restarts, str(last.get("reason", "")), exit_code=0)
    state = "BUDGET_SPENT" if code == exitcodes.BUDGET_SPENT else "FAILED"
    return JobState(state, restarts, str(last.get("reason", "")), exit_code=code if isinstance(code, int) else 1)


def display_state(state: str, restarts: int) -> str:
    if state == "PENDING" and restarts > 0:
        return "REQUEUED"
    return state


def state_from_slurm(record: JobRecord, runner: Runner) -> JobState:
    run_dir = Path(record.run_dir)
    row = commands.squeue(record.job_id, runner)
    restarts = restarts_from_events(run_dir)
    if row is not None:
        reason = "" if row.reason in ("None", "(null)") else row.reason
        return JobState(display_state(row.state, restarts), restarts, reason, row.nodes, row.elapsed)
    from_events = state_from_events(run_dir)
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
