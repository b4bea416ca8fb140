"""`ddpctl watch`'s judgement of one live run: what the job itself cannot report (pure `judge`, then `act`).

A job cannot tell of its own disappearance (its batch shell or supervisor killed: no decision is ever recorded)
nor, when its watchdog is off or dead with it, of a stall. A cron job or a login-node loop runs `ddpctl watch`;
each pass looks at every run of the registry that has not ended by its own decision:
- vanished: the backend says the job ended (FAILED, CANCELLED by Slurm, gone) and no decision was recorded;
- stalled: the backend says RUNNING, and no rank progressed (its newest step, else the attempt's start) for
  longer than the run's allowance (health.hang_timeout_s, else hang_floor_s; startup_s before any step).
Each finding is recorded once per attempt and kind (`watch-found`) and told through the spec's `notify:` block.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpctl.health.records import latest_attempt, progress_records
from ddpctl.run import history, notify
from ddpctl.run.history import RunHistory, WatchFound
from ddpctl.run.layout import RunLayout
from ddpctl.run.state import JobState
from ddpctl.spec.model import HealthSettings


@dataclass(frozen=True)
class Finding:
    kind: str  # vanished or stalled
    attempt: int | None
    why: str


def judge(
    state: JobState, past: RunHistory, health: HealthSettings, newest_step_t: float | None, now: float
) -> Finding | None:
    """The one thing wrong with a run, or None (a run that ended by its own decision is never judged)."""
    outcome = past.outcome()
    if past.cancelled() or (outcome is not None and outcome.action == "finish"):
        return None
    attempt = max(past.attempts, default=None)
    if state.terminal:
        why = f"the backend says {state.state}{f' ({state.reason})' if state.reason else ''}; no decision recorded"
        return Finding("vanished", attempt, why)
    if state.state != "RUNNING" or attempt is None:
        return None
    start = past.attempt(attempt).start
    since = newest_step_t if newest_step_t is not None else (start.t if start is not None else None)
    if since is None:
        return None
    allowance = health.startup_s if newest_step_t is None else (health.hang_timeout_s or health.hang_floor_s)
    idle = now - since
    if idle <= allowance:
        return None
    what = "no step reported" if newest_step_t is None else "no progress"
    return Finding("stalled", attempt, f"{what} for {idle:.0f} s (allowance {allowance} s) while RUNNING")


def newest_step(layout: RunLayout) -> float | None:
    """When any rank of the newest attempt last reported a step (its progress record's `t`)."""
    attempt = latest_attempt(layout)
    if attempt is None:
        return None
    times = [r.get("t") for r in progress_records(layout, attempt).values()]
    return max((t for t in times if isinstance(t, int | float)), default=None)


def act(layout: RunLayout, past: RunHistory, finding: Finding) -> bool:
    """Record the finding and tell it, unless this attempt's same finding was recorded before; True: it is new."""
    if any(e.kind == finding.kind and e.attempt == finding.attempt for e in past.all(WatchFound)):
        return False
    event = history.append(layout.events, WatchFound(attempt=finding.attempt, kind=finding.kind, why=finding.why))
    notify.on_event(layout, event, RunHistory((*past.events, event)))
    return True
