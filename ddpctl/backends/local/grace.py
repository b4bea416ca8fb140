"""The local backend's stand-in for the end of Slurm's grace time: a stop nobody acknowledged ends in a kill.

On a cluster, a job that has not stopped when its time runs out (the partition's GraceTime after a preemption,
the time limit `lead_s` after the warning) is killed, and the work since the script's own last checkpoint is
lost. The local supervisor does the same `lead_s` after the stop request, so a rehearsal on a laptop ends the way
the cluster's would: the attempt is killed, the requeue decision follows and the next attempt starts from
whatever checkpoint there is. The kill is recorded (`stop-killed`) with what was lost, as far as it can be known:
the steps, when the ranks report progress (`runtime.Heartbeat`) and the checkpoint is the runtime's; otherwise the
time since the newest file in the checkpoint directory.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from ddpctl.health.records import last_checkpoint, progress_records
from ddpctl.run import history, resumepoint
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, time_to_seconds

# After the lead time node 0's launcher records `stop-unacknowledged`; the kill comes a moment later so that the
# record of what happened stays in that order.
KILL_SLACK_S = 1.0
MAX_ENTRIES = 10_000  # bounded look at a checkpoint directory


def kill_due(requested_at: float | None, lead_s: int, now: float, acknowledged: bool) -> bool:
    """True once a stop went unacknowledged past its lead time (pure)."""
    return requested_at is not None and not acknowledged and now - requested_at >= lead_s + KILL_SLACK_S


class TimeLimit:
    """One attempt's clock for the spec's `time:` (a requeued job's limit starts again, as on Slurm): the stop
    signal is due `lead_s` before the limit (where requeue is on: Slurm's `--signal`), the kill at the limit."""

    def __init__(self, spec: JobSpec, started: float) -> None:
        self.limit_s = time_to_seconds(spec.time) if spec.time else None
        self.lead_s = spec.requeue.lead_s if spec.requeue.enabled else None
        self.started, self.warned, self.spec_time = started, False, spec.time

    def left(self, now: float) -> int | None:
        return None if self.limit_s is None else max(0, round(self.limit_s - (now - self.started)))

    def warning_due(self, now: float) -> bool:
        """True once, when the warning is due (at once if the limit is shorter than the lead time)."""
        if self.warned or self.limit_s is None or self.lead_s is None:
            return False
        self.warned = now - self.started >= self.limit_s - self.lead_s
        return self.warned

    def kill_due(self, now: float) -> bool:
        return self.limit_s is not None and now - self.started >= self.limit_s + KILL_SLACK_S

    def warning_line(self) -> str:
        return f"time limit {self.spec_time} in {self.lead_s} s: sending the stop signal, as Slurm's --signal would"

    def kill_line(self) -> str:
        return f"time limit {self.spec_time} reached: killing the attempt, as Slurm would"


def lost_text(
    last_step: int | None, checkpoint_step: int | None, checkpoint_age_s: float | None, stray: str | None = None
) -> str:
    """What the kill cost, in steps when both ends are known, else in time (pure). `stray`: a checkpoint-like file
    in the script's working directory, which the script may resume from although checkpoint.dir is empty."""
    if last_step is not None and checkpoint_step is not None:
        lost = max(0, last_step - checkpoint_step)
        return f"{lost} step(s) lost (step {last_step} reached, newest checkpoint at step {checkpoint_step})"
    if checkpoint_age_s is None and stray is not None:
        return (
            f"nothing in checkpoint.dir, but {stray} (in the working directory, outside the run dir: every job of "
            "this spec sees it) may be what the script resumes from"
        )
    if last_step is not None and checkpoint_age_s is None:
        return f"all {last_step} step(s) of this attempt lost (no checkpoint to resume from)"
    if checkpoint_age_s is None:
        return "no checkpoint to resume from: the next attempt starts from scratch"
    if checkpoint_step is not None:  # a script's own checkpoint whose name carries its step (a preset's)
        return f"the work of the {checkpoint_age_s:.0f} s since the checkpoint of step {checkpoint_step} is lost"
    return f"the work of the {checkpoint_age_s:.0f} s since the newest checkpoint file is lost"


CHECKPOINT_LIKE = re.compile(r".*\.(pt|pth|ckpt|safetensors)|checkpoint.*|snapshot.*|ckpt.*", re.IGNORECASE)


def stray_checkpoint(directory: Path) -> str | None:
    """The newest checkpoint-like file of `directory` (the script's working directory), bounded, links skipped."""
    best: tuple[float, str] | None = None
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_ENTRIES:
                    break
                if CHECKPOINT_LIKE.fullmatch(entry.name) and not entry.is_symlink():
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                    best = max(best or (mtime, entry.path), (mtime, entry.path))
    except OSError:
        return None
    return best[1] if best is not None else None


def newest_file(directory: Path) -> tuple[str, float] | None:
    """(path, mtime) of the newest entry of a checkpoint directory (bounded; symlinks not followed)."""
    best: tuple[str, float] | None = None
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_ENTRIES:
                    break
                if entry.name.startswith("."):
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime
                if best is None or mtime > best[1]:
                    best = (entry.path, mtime)
    except OSError:
        return None
    return best


def measure(layout: RunLayout, spec: JobSpec, attempt: int, now: float) -> dict[str, Any]:
    """What the run dir says about the attempt's progress and its newest checkpoint, as event fields."""
    steps = [r["step"] for r in progress_records(layout, attempt).values() if isinstance(r.get("step"), int)]
    directory = layout.checkpoints(spec.checkpoint.dir)
    runtime_ckpt = last_checkpoint(directory)
    newest = newest_file(directory)
    # A preset's checkpoints: the one the next attempt resumes from, not the file the trainer wrote last.
    own = resumepoint.resume_point(spec, directory) if runtime_ckpt is None and resumepoint.rule_of(spec) else None
    if own is not None:
        runtime_ckpt, newest = (
            (own.step, own.mtime) if own.step is not None else None,
            (str(directory / own.name), own.mtime),
        )
    elif resumepoint.rule_of(spec) is not None:
        newest = None  # files of the script's kind, none complete: nothing to resume from
    when = runtime_ckpt[1] if runtime_ckpt is not None else newest[1] if newest is not None else None
    return {
        "last_step": max(steps) if steps else None,
        "checkpoint_step": runtime_ckpt[0] if runtime_ckpt is not None else None,
        "checkpoint": newest[0] if newest is not None else None,
        "checkpoint_age_s": round(now - when, 1) if when is not None else None,
    }


def record_kill(layout: RunLayout, spec: JobSpec, attempt: int, waited_s: float) -> str:
    """Record the kill and return the line for the supervisor's log."""
    facts = measure(layout, spec, attempt, time.time())
    # The local backend runs the script in the directory submit ran in, which is this process's own.
    stray = stray_checkpoint(Path.cwd()) if facts["checkpoint"] is None else None
    lost = lost_text(facts["last_step"], facts["checkpoint_step"], facts["checkpoint_age_s"], stray)
    history.append(layout.events, history.StopKilled(attempt=attempt, waited_s=round(waited_s, 1), lost=lost, **facts))
    return (
        f"ddpctl local: attempt {attempt}: no rank acknowledged the stop within its lead time ({spec.requeue.lead_s}"
        f" s): killing it, as Slurm would at the end of the grace time; {lost}"
    )
