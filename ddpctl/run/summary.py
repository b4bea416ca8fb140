"""What a person wants to know about a run at a glance, from its own files: elapsed, nodes, attempts, last step.

Works for finished jobs without Slurm accounting (the events carry the times and node lists). The last step is
the heartbeat's (runtime.Heartbeat's progress records, the newest attempt that has any) when the script keeps one;
a script whose own checkpoints a `resume:` preset or `checkpoint.pattern` names gets the step its newest complete
checkpoint's name carries (`checkpoint-600/`), said as such: its log is a trainer's, whose "Resuming training
from checkpoint with epoch 3 and global step 300" is no step reached (issue 42); only another script without a
heartbeat gets what rank 0 last logged as "step N" (the example and tutorial scripts do), read from the tail of its
newest log: log text is the script's, and "warmup step 99999" is no training step (issue 43). A display, never a
decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run import history, resumepoint, rundir
from ddpctl.run.history import RunHistory
from ddpctl.run.layout import RunLayout, attempts_in, rank_of_progress
from ddpctl.spec import JobSpec

TAIL_BYTES = 16384  # bounded: only the end of rank 0's log is read
MAX_STEP = 2**63  # a step from a rank's record (untrusted) at or past this is not a step
STEP_RE = re.compile(r"\bstep[ =:]+(\d+)")


@dataclass(frozen=True)
class RunSummary:
    elapsed_s: float | None  # first start to last record
    nodes: str  # the newest attempt's node list
    attempts: int
    last_step: int | None
    step_from: str = "records"  # records (the heartbeat's), checkpoint (a preset's names), log (rank 0's text)

    def as_json(self) -> dict[str, Any]:
        return {
            "elapsed_s": self.elapsed_s,
            "nodes": self.nodes,
            "attempts": self.attempts,
            "last_step": self.last_step,
            "last_step_from": self.step_from if self.last_step is not None else None,
        }


def format_elapsed(seconds: float | None) -> str:
    """1h02m03s / 4m05s / 9s (pure)."""
    if seconds is None:
        return "?"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def last_step_in(text: str) -> int | None:
    """The last "step N" in the text (pure)."""
    found = STEP_RE.findall(text)
    return int(found[-1]) if found else None


def summarize(layout: RunLayout, past: RunHistory | None = None) -> RunSummary:
    """`past`: the run's history as the caller read it (read here when None)."""
    first, last_t, nodes = (past if past is not None else history.load(layout.events)).span()
    elapsed = None if first is None or last_t is None else max(0.0, last_t - first)
    attempts = attempts_in(_entries(layout.root))
    beats = [found for attempt in reversed(attempts) if (found := heartbeat_steps(layout, attempt)) is not None]
    if beats:  # the newest attempt whose ranks keep a heartbeat, and its furthest rank
        return RunSummary(elapsed, nodes, len(attempts), max(beats[0]) if beats[0] else None)
    spec = spec_naming_checkpoints(layout)
    if spec is not None:
        own = resumepoint.resume_point(spec, layout.checkpoints(spec.checkpoint.dir))
        return RunSummary(elapsed, nodes, len(attempts), own.step if own is not None else None, "checkpoint")
    step = None
    for attempt in reversed(attempts):  # no heartbeat anywhere: the newest attempt that logged a step
        step = last_step_in(
            (safeio.read_bounded(layout.rank_log(attempt, 0), TAIL_BYTES, tail=True) or b"").decode(errors="replace")
        )
        if step is not None:
            break
    return RunSummary(elapsed, nodes, len(attempts), step, "log")


def spec_naming_checkpoints(layout: RunLayout) -> JobSpec | None:
    """The run's spec where it names the script's own checkpoints (`resume:`, `checkpoint.pattern`); None for any
    other script, or when the run's spec cannot be read (a display: that only loses this line's step)."""
    try:
        spec = rundir.run_spec(layout)
    except Exception:
        return None
    return spec if resumepoint.rule_of(spec) is not None else None


def heartbeat_steps(layout: RunLayout, attempt: int) -> list[int] | None:
    """The steps the attempt's progress records report (empty: records, none past its first step yet); None when
    the attempt has no readable record. Out-of-range or non-integer steps (rank output, untrusted) are skipped."""
    directory = layout.attempt_dir(attempt)
    found: list[int] | None = None
    for name in _entries(directory):
        if rank_of_progress(name) is None or (record := safeio.read_json(directory / name)) is None:
            continue
        found = [] if found is None else found
        step = record.get("step")
        if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < MAX_STEP:
            found.append(step)
    return found


def _entries(root: Path) -> list[str]:
    try:
        return [p.name for p in root.iterdir()]
    except OSError:
        return []
