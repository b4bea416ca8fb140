"""What `status` and `submit --wait` print about a job: its state, and for a finished one the whole story
(elapsed, nodes, restarts, last step, each stop and restart) — never an empty field or a "(None)"."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ddpctl import exitcodes
from ddpctl.health.report import checkpoint_dir, newest_checkpoint
from ddpctl.node.exclude import describe
from ddpctl.run import history
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.run.stoptruth import run_summary
from ddpctl.run.summary import RunSummary, format_elapsed, summarize
from ddpctl.sanitize import visible

MAX_NOTES = 8  # bounded: the newest stops and restarts matter most


def describe_state(state: JobState, *, elapsed: bool = True) -> str:
    parts = [state.state]
    if state.reason:
        parts.append(f"({state.reason})")
    if state.nodes and state.state == "RUNNING":
        parts.append(f"on {state.nodes}")
    if state.restarts:
        parts.append(f"restart {state.restarts}")
    if elapsed and state.elapsed:
        parts.append(state.elapsed)
    return " ".join(parts)


def exit_status(state: JobState) -> int:
    if state.state == "COMPLETED":
        return exitcodes.OK
    if state.exit_code not in (None, exitcodes.OK):
        return int(state.exit_code)
    return exitcodes.FAILURE


def completed(record: JobRecord, state: JobState, summary: RunSummary) -> JobState:
    """A finished job's state with what Slurm no longer says filled in from the run's own files."""
    if not state.terminal:
        return state
    from dataclasses import replace

    return replace(
        state,
        reason=state.reason or state.state.lower(),
        nodes=state.nodes or summary.nodes or "?",
        elapsed=state.elapsed or format_elapsed(summary.elapsed_s),
        exit_code=state.exit_code if state.exit_code is not None else exit_status(state),
    )


def payload(record: JobRecord, state: JobState) -> dict[str, Any]:
    layout = RunLayout(Path(record.run_dir))
    summary = summarize(layout)
    stops, notes = run_summary(layout, time.time())
    past = history.load(layout.events)
    return {
        "job_id": record.job_id,
        "name": record.name,
        "backend": record.backend,
        "run_dir": record.run_dir,
        **asdict(completed(record, state, summary)),
        "attempts": summary.attempts,
        "newest_checkpoint": str(newest) if (newest := newest_checkpoint(layout)) else None,
        "last_step": summary.last_step,
        "checkpoints": str(checkpoint_dir(layout)),
        "stops": [s.as_json() for s in stops],
        "restart_notes": notes,
        "excluded_nodes": sorted(past.excluded_nodes()),
        "exclusions": [e.as_json() for e in past.exclusions()],
        "causes": cause_lines(layout),
    }


def lines(record: JobRecord, state: JobState) -> list[str]:
    layout = RunLayout(Path(record.run_dir))
    summary = summarize(layout)
    shown = completed(record, state, summary)
    out = [f"{record.job_id}  {record.name}  {describe_state(shown, elapsed=not state.terminal)}"]
    if state.terminal:
        step = "none logged" if summary.last_step is None else summary.last_step
        if summary.step_from == "checkpoint":  # a trainer's own checkpoints: their names carry a step it reached
            saved = f"newest checkpoint at step {summary.last_step}" if summary.last_step is not None else "none saved"
            step = f"not recorded ({saved})"
        out.append(f"  elapsed {shown.elapsed} on {shown.nodes}, restarts {state.restarts}, last step {step}")
    out.append(f"  backend {record.backend}, run dir {record.run_dir}")
    if state.terminal:
        out.append(f"  logs: ddpctl logs {record.job_id} --attempt all; checkpoints: {checkpoint_dir(layout)}")
    if (newest := newest_checkpoint(layout)) is not None:
        out.append(f"  newest checkpoint: {visible(str(newest))}")
    stops, notes = run_summary(layout, time.time())
    out += [f"  {line}" for line in [*(s.text for s in stops), *notes][-MAX_NOTES:]]
    out += [f"  {visible(line)}" for line in describe(history.load(layout.events))]
    out += [f"  {line}" for line in cause_lines(layout)[-MAX_NOTES:]]
    return out


def cause_lines(layout: RunLayout) -> list[str]:
    """What ended each attempt and who failed first, as its decision recorded it (`ddpctl.node.blame`)."""
    out, past = [], history.load(layout.events)
    inside = {e.attempt: e for e in past.all(history.SpareRestarted)}  # spare_nodes: no requeue, a new step
    for decided in past.all(history.Decided):
        text = decided.cause_text()
        if text is not None and decided.cause != "stop":
            then = "requeued" if decided.action == "requeue" else "the run ended"
            if decided.attempt in inside:
                then = f"restarted inside the job on {','.join(inside[decided.attempt].nodes)}"
            out.append(visible(f"attempt {decided.attempt} ended by {text[:400]} ({then}: {decided.reason[:200]})"))
    return out
