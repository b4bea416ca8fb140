"""A job's state as every backend reports it (pure data; `ddpctl.backends.current_state` asks the backend)."""

from __future__ import annotations

from dataclasses import dataclass

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
