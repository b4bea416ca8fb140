"""A job's state as every backend reports it (pure data; `ddpctl.backends.current_state` asks the backend)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddpctl.run.registry import JobRecord

TERMINAL = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "BUDGET_SPENT",
    }
)


@dataclass(frozen=True)
class JobState:
    state: str  # Slurm-style: PENDING, RUNNING, REQUEUED, PREEMPTED, COMPLETED, FAILED, CANCELLED, ...
    restarts: int = 0
    reason: str = ""
    nodes: str = ""
    elapsed: str = ""
    exit_code: int | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


# How a job's state is asked (the backend's current_state by default; tests and followers pass their own).
StateFn = Callable[["JobRecord"], JobState]
