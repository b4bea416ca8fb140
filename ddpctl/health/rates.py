"""Figures from progress records (pure): step of total, recent steps/s and samples/s, ETA; steady throughput.

No rate and no ETA while progress is missing: once no rank has progressed for STALL_STEPS x the slowest median
step (at least STALL_MIN_S), a 30 s window still holding an old step would show a small rate and a made-up ETA
for a job that is not moving; the summary says how long progress has been missing instead. A pause the script
declared (`Heartbeat.pause`) is honoured as the hang watchdog honours it (health.hang): while a rank is in one, its
allowance (its own, else `health.pause_s`) is added to that limit and the summary names the pause, and the end of
a pause counts as progress.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ddpctl.health.hang import declared_pause
from ddpctl.spec import HealthSettings

Record = Mapping[str, Any]
WINDOW_S = 30.0  # "recent": the last this many seconds of each rank's history
STALL_STEPS = 5  # also `top`'s STALL flag (health.view)
STALL_MIN_S = 10.0
PAUSE_S = HealthSettings().pause_s  # a declared pause's allowance when neither it nor the spec names one


@dataclass(frozen=True)
class Summary:
    step: int | None
    total_steps: int | None
    steps_per_s: float | None
    samples_per_s: float | None
    eta_s: float | None
    last_progress_s: float | None  # seconds since the newest progress of any rank
    stalled: bool = False  # progress has been missing too long for a rate: steps_per_s, samples_per_s, eta None
    paused: str | None = None  # the declared pause(s) some rank is in (no rate or ETA either, but no stall)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _history(record: Record) -> list[tuple[float, float, float]]:
    points = []
    for point in record.get("history") or []:
        if isinstance(point, list) and len(point) == 3 and all(_finite(v) for v in point):
            points.append((float(point[0]), float(point[1]), float(point[2])))
    return points


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _rate(points: list[tuple[float, float, float]], index: int) -> float | None:
    """Rate of column `index` (1: steps, 2: samples) between the first and last point."""
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    return (points[-1][index] - points[0][index]) / (points[-1][0] - points[0][0])


def rate_until(
    points: list[tuple[float, float, float]], index: int, now: float, window_s: float = WINDOW_S
) -> float | None:
    """Rate over the window ending *now*: a rank that stopped moving drifts to 0 instead of keeping its
    last rate. Starts at the last point before the window (or the first inside it)."""
    before = [p for p in points if p[0] < now - window_s]
    inside = [p for p in points if p[0] >= now - window_s]
    start = before[-1] if before else (inside[0] if inside else None)
    if start is None or now <= start[0]:
        return None
    if start is points[-1] and not before:
        return None  # one point, no interval yet
    return (points[-1][index] - start[index]) / (now - start[0])


def progress_time(record: Record) -> float | None:
    """When the rank last progressed: its last step or the end of its last declared pause, the newer."""
    found = [float(record[key]) for key in ("t", "resumed") if _finite(record.get(key))]
    return max(found, default=None)


def summarize(records: Mapping[int, Record], now: float, pause_s: float = PAUSE_S) -> Summary:
    """`pause_s`: the spec's `health.pause_s` (the allowance of a declared pause that names none)."""
    steps = [r["step"] for r in records.values() if isinstance(r.get("step"), int)]
    totals = [r["total_steps"] for r in records.values() if isinstance(r.get("total_steps"), int)]
    step, total = (max(steps) if steps else None), (max(totals) if totals else None)
    times = [t for t in map(progress_time, records.values()) if t is not None]
    last = now - max(times) if times else None
    pause = declared_pause(records, pause_s)
    if last is not None and last > stall_after(records):
        if pause is None or last > stall_after(records) + pause[0]:
            return Summary(step, total, None, None, None, last, stalled=True)
        return Summary(step, total, None, None, None, last, paused=pause[1])  # as the watchdog allows it
    lead = max(records.values(), key=lambda r: r["step"] if isinstance(r.get("step"), int) else -1, default=None)
    steps_per_s = rate_until(_history(lead), 1, now) if lead else None
    sample_rates = [rate_until(_history(r), 2, now) for r in records.values()]
    known = [rate for rate in sample_rates if rate is not None]
    samples_per_s = sum(known) if known and len(known) == len(records) else None
    eta = (total - step) / steps_per_s if total is not None and step is not None and steps_per_s else None
    return Summary(step, total, steps_per_s, samples_per_s, eta, last, paused=pause[1] if pause else None)


def stall_after(records: Mapping[int, Record]) -> float:
    """Seconds without progress after which no rate is shown (see the module docstring)."""
    steps = [float(r["step_s"]) for r in records.values() if _finite(r.get("step_s"))]
    return max(STALL_MIN_S, STALL_STEPS * max(steps, default=0.0))


def steady_samples_per_s(records: Mapping[int, Record], warmup_steps: int) -> float | None:
    """Job throughput with the first `warmup_steps` excluded: per rank, the history points after warm-up;
    the sum of the ranks' rates (each rank reports its own samples)."""
    rates = []
    for record in records.values():
        points = [p for p in _history(record) if p[1] > warmup_steps]
        rate = _rate(points, 2)
        if rate is None:
            return None
        rates.append(rate)
    return sum(rates) if rates else None


def duration(seconds: float | None) -> str:
    if seconds is None or not _finite(seconds):
        return "?"
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
