"""A job's current state, whatever the backend: the one query `status`, `logs -f` and `--wait` use.

(Interface first; the backends fill it in.)
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpctl.registry import JobRecord

TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
                      "DEADLINE", "BUDGET_SPENT"})


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


def current_state(record: JobRecord) -> JobState:
    """Ask the record's backend for the job's state (imported lazily: each backend has its own plumbing)."""
    from ddpctl.backends import get_backend

    return get_backend(record.backend).state(record)
