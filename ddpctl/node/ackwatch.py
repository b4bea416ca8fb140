"""The launcher's watch over a stop request: says so, in the events and slurm.out, when no rank acknowledged it.

Node rank 0's launcher alone reports (one record per attempt, not one per node). Started from the stop-signal
handler (which only records the time) and ticked from the launcher's wait loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ddpctl.run import history
from ddpctl.run.history import StopUnacknowledged
from ddpctl.run.layout import RunLayout
from ddpctl.run.stoptruth import HOW_TO, read_listeners


def overdue(requested_at: float | None, lead_s: int, now: float, acknowledged: bool) -> bool:
    """True once a stop went unacknowledged for its whole lead time (pure)."""
    return requested_at is not None and not acknowledged and now - requested_at >= lead_s


class AckWatch:
    def __init__(
        self, layout: RunLayout, attempt: int, node_rank: int, lead_s: int, clock: Callable[[], float] = time.time
    ) -> None:
        self.layout, self.attempt, self.node_rank, self.lead_s, self.clock = layout, attempt, node_rank, lead_s, clock
        self.requested_at: float | None = None
        self.reported = False

    def stop_requested(self) -> None:
        """Signal-handler safe: records the time only."""
        if self.requested_at is None:
            self.requested_at = self.clock()

    def tick(self) -> bool:
        """Report once if overdue; True when it reported."""
        if self.reported or self.node_rank != 0:
            return False
        acknowledged = self.layout.stopped_marker(self.attempt).exists()
        if not overdue(self.requested_at, self.lead_s, self.clock(), acknowledged):
            return False
        self.reported = True
        listeners = read_listeners(self.layout, self.attempt)
        history.append(
            self.layout.events, StopUnacknowledged(attempt=self.attempt, waited_s=self.lead_s, listeners=listeners)
        )
        who = "no rank listens for stops" if not listeners else f"{len(listeners)} rank(s) listen but did not stop"
        print(
            f"ddpctl launch: WARNING: no rank acknowledged the stop within its lead time ({self.lead_s} s): "
            f"{who}; the script keeps training until it ends or is killed, and work since its own last "
            f"checkpoint is lost; {HOW_TO}",
            flush=True,
        )
        return True
