"""Why a FAILED run failed, in one line for `status`, `submit --wait` and `Job.status()`: the recorded cause (a
hang) and the first error that `logs --errors` finds in the newest attempt. Rank output is untrusted: the text
passes through sanitize."""

from __future__ import annotations

from dataclasses import replace

from ddpctl import sanitize
from ddpctl.health.records import latest_attempt
from ddpctl.logs.core import LineFilter
from ddpctl.logs.failures import order_failures
from ddpctl.logs.show import attempt_failures
from ddpctl.run import history
from ddpctl.run.history import Hung, OomKilled
from ddpctl.run.layout import RunLayout
from ddpctl.run.state import JobState

TEXT_MAX = 300


def failure_cause(layout: RunLayout) -> str | None:
    """ "hang: ...; first error: rank 1 on n2, line 40: ValueError: ..." for the newest attempt (None: nothing)."""
    attempt = latest_attempt(layout)
    if attempt is None:
        return None
    past = history.load(layout.events)
    failures, events, _ = attempt_failures(layout, attempt, LineFilter(), past)
    decided = past.attempt(attempt).decision
    said = decided.cause_text() if decided is not None and decided.cause != "stop" else None
    parts = [f"ended by {said}"] if said else []
    for event in events:
        if isinstance(event, Hung):
            collective = f"{event.collective}; " if event.collective else ""
            parts.append(f"hang: {collective}no progress for {event.idle_s} s (allowed {event.timeout_s} s)")
        elif isinstance(event, OomKilled):
            parts.append(f"out of memory on {event.node}")
    if failures:
        first = order_failures(failures)[0]
        where = f"rank {first.source.rank} on {first.source.node or '?'}, {first.hit.where}"
        parts.append(f"first error in attempt {attempt}: {where}: {first.hit.text}")
    text = "; ".join(parts)
    return sanitize.visible(text[:TEXT_MAX]) if text else None


def with_cause(state: JobState, layout: RunLayout) -> JobState:
    """A FAILED state with its cause and first error appended to the reason (others unchanged)."""
    if state.state != "FAILED":
        return state
    try:
        cause = failure_cause(layout)
    except OSError:  # an unreadable run dir: the state as the backend said it
        return state
    if not cause:
        return state
    return replace(state, reason=f"{state.reason}; {cause}" if state.reason else cause)
