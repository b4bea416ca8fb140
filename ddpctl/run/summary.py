"""What a person wants to know about a run at a glance, from its own files: elapsed, nodes, attempts, last step.

Works for finished jobs without Slurm accounting (the events carry the times and node lists). The last step is
what rank 0 last logged as "step N" (the example and tutorial scripts do), read from the tail of its newest log:
a display, never a decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run import history
from ddpctl.run.history import RunHistory
from ddpctl.run.layout import RunLayout, attempts_in

TAIL_BYTES = 16384  # bounded: only the end of rank 0's log is read
STEP_RE = re.compile(r"\bstep[ =:]+(\d+)")


@dataclass(frozen=True)
class RunSummary:
    elapsed_s: float | None  # first start to last record
    nodes: str  # the newest attempt's node list
    attempts: int
    last_step: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "elapsed_s": self.elapsed_s,
            "nodes": self.nodes,
            "attempts": self.attempts,
            "last_step": self.last_step,
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
    step = None
    for attempt in reversed(attempts):  # the newest attempt that logged a step
        step = last_step_in(
            (safeio.read_bounded(layout.rank_log(attempt, 0), TAIL_BYTES, tail=True) or b"").decode(errors="replace")
        )
        if step is not None:
            break
    return RunSummary(elapsed, nodes, len(attempts), step)


def _entries(root: Path) -> list[str]:
    try:
        return [p.name for p in root.iterdir()]
    except OSError:
        return []
