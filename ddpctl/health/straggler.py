"""Straggler verdict (pure): a rank whose busy time per step stays above k x the other ranks' median.

"Busy" is the step time minus the time the rank waited for the others inside DDP (runtime.Heartbeat with
`model=`): under DDP every rank's step takes the same wall time, so only the busy time singles out the rank the
others wait for. Each record carries the median over the rank's last `window` steps; a rank is judged once its
window holds `health.straggler_steps` steps, so one slow step is never enough. The excess must also be at least
MIN_EXCESS_S, so microsecond jitter on very fast steps is not reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MIN_EXCESS_S = 0.01


@dataclass(frozen=True)
class Straggler:
    rank: int
    node: str
    busy_s: float
    median_s: float  # of the other ranks

    @property
    def factor(self) -> float:
        return self.busy_s / self.median_s if self.median_s > 0 else float("inf")


def find_stragglers(records: Mapping[int, Mapping[str, Any]], factor: float, steps: int) -> list[Straggler]:
    if factor <= 0:
        return []
    busy = {
        rank: float(r["busy_s"])
        for rank, r in records.items()
        if isinstance(r.get("busy_s"), (int, float))
        and isinstance(r.get("window"), int)
        and r["window"] >= steps
        and r.get("phase") == "train"
    }
    out = []
    for rank, value in sorted(busy.items()):
        others = [v for r, v in busy.items() if r != rank]
        if not others:
            continue
        median = statistics.median(others)
        if value > factor * median and value - median >= MIN_EXCESS_S:
            out.append(Straggler(rank, str(records[rank].get("node", "?")), value, median))
    return out
