"""Hang verdict (pure): has no rank progressed for longer than the allowance?

The allowance is `health.hang_timeout_s` when set, else derived from the observed step times: HANG_STEP_FACTOR x
the slowest rank's median step, never below `health.hang_floor_s`. Before any rank finished a step the
allowance is `health.startup_s` (imports, data, rendezvous, compilation); while any rank is saving a
checkpoint, `health.checkpoint_s` is added; while any rank is in a pause it declared (`Heartbeat.pause`:
evaluation, epoch-end work), that pause's own allowance or `health.pause_s` is added, and the end of a declared
pause counts as progress. A job whose ranks never report (no runtime.Heartbeat) is only
judged when `hang_timeout_s` is set, from the attempt's start; otherwise the watchdog has nothing to go on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpctl.spec import HealthSettings

HANG_STEP_FACTOR = 10
Record = Mapping[str, Any]


@dataclass(frozen=True)
class HangVerdict:
    idle_s: float  # since the newest progress of any rank
    allowed_s: float
    why: str  # which allowance applied


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def last_progress(record: Record) -> float | None:
    """When the rank last progressed: its last step, or (before its first step) when its heartbeat started, or
    the end of a declared pause, whichever is newest."""
    base = _time(record.get("t") if record.get("step") is not None else record.get("started"))
    found = [t for t in (base, _time(record.get("resumed"))) if t is not None]
    return max(found, default=None)


def pause_of(record: Record, default_s: float) -> tuple[float, str] | None:
    """(extra allowance, name) while this rank is in a pause it declared (its own allowance, else `default_s`)."""
    pause = record.get("pause")
    if not isinstance(pause, dict) or record.get("phase") in ("train", "done", "checkpoint", "start"):
        return None
    own = _time(pause.get("allowance_s"))
    return (own if own is not None and own > 0 else float(default_s)), str(pause.get("name"))[:40]


def declared_pause(records: Mapping[int, Record], default_s: float) -> tuple[float, str] | None:
    """(extra allowance, names) while any rank is in a pause it declared; the longest allowance counts."""
    found = [p for record in records.values() if (p := pause_of(record, default_s)) is not None]
    if not found:
        return None
    names = ", ".join(sorted({name for _, name in found}))
    return max(extra for extra, _ in found), names


def derived_timeout(policy: HealthSettings, records: Mapping[int, Record]) -> float:
    if policy.hang_timeout_s:
        return float(policy.hang_timeout_s)
    steps = [float(r["step_s"]) for r in records.values() if isinstance(r.get("step_s"), (int, float))]
    return max(float(policy.hang_floor_s), HANG_STEP_FACTOR * max(steps, default=0.0))


def check_hang(
    now: float, attempt_started: float, records: Mapping[int, Record], policy: HealthSettings
) -> HangVerdict | None:
    if policy.hang_timeout_s == 0:
        return None
    if any(r.get("phase") == "done" for r in records.values()):
        return None  # a rank finished: the job is ending, whatever the others do
    times = [t for t in map(last_progress, records.values()) if t is not None]
    if not times:
        if policy.hang_timeout_s is None:
            return None
        idle, allowed, why = now - attempt_started, float(policy.startup_s), "health.startup_s, no rank reported"
    elif all(r.get("step") is None for r in records.values()):
        idle, allowed, why = now - max(times), float(policy.startup_s), "health.startup_s before the first step"
    else:
        idle, allowed = now - max(times), derived_timeout(policy, records)
        why = (
            "health.hang_timeout_s"
            if policy.hang_timeout_s
            else (f"derived: max(health.hang_floor_s, {HANG_STEP_FACTOR} x the slowest median step)")
        )
    if any(r.get("phase") == "checkpoint" for r in records.values()):
        allowed += policy.checkpoint_s
        why += " + health.checkpoint_s (a checkpoint save)"
    if (pause := declared_pause(records, policy.pause_s)) is not None:
        allowed += pause[0]
        why += f" + {pause[0]:g} s for a declared pause ({pause[1]})"
    return HangVerdict(round(idle, 1), allowed, why) if idle > allowed else None
