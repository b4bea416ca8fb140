"""`ddpctl watch`'s judgement (pure, a literal table) and its record-once action."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddpctl.health.watch import Finding, act, judge
from ddpctl.run import history
from ddpctl.run.history import RunHistory, WatchFound
from ddpctl.run.layout import RunLayout
from ddpctl.run.state import JobState
from ddpctl.spec.model import HealthSettings

NOW = 10_000.0
START = [{"event": "attempt-start", "t": NOW - 2000, "attempt": 0}]
FINISHED = [*START, {"event": "decision", "t": NOW - 5, "attempt": 0, "action": "finish", "exit_code": 1}]
REQUEUED = [*START, {"event": "decision", "t": NOW - 5, "attempt": 0, "action": "requeue", "kind": "preemption"}]
CANCELLED = [*START, {"event": "cancelled", "t": NOW - 5, "attempt": 0}]
RUNNING, FAILED = JobState("RUNNING"), JobState("FAILED", reason="supervisor gone")


@pytest.mark.parametrize(
    ("state", "records", "health", "step_t", "expected"),
    [
        (FAILED, FINISHED, HealthSettings(), None, None),  # ended by its own decision
        (JobState("CANCELLED"), CANCELLED, HealthSettings(), None, None),
        (FAILED, START, HealthSettings(), None,
         Finding("vanished", 0, "the backend says FAILED (supervisor gone); no decision recorded")),
        (JobState("NODE_FAIL"), REQUEUED, HealthSettings(), None,
         Finding("vanished", 0, "the backend says NODE_FAIL; no decision recorded")),
        (RUNNING, START, HealthSettings(), NOW - 10, None),
        (RUNNING, START, HealthSettings(), NOW - 400,
         Finding("stalled", 0, "no progress for 400 s (allowance 300 s) while RUNNING")),
        (RUNNING, START, HealthSettings(hang_timeout_s=60), NOW - 61,
         Finding("stalled", 0, "no progress for 61 s (allowance 60 s) while RUNNING")),
        (RUNNING, START, HealthSettings(startup_s=3600), None, None),
        (RUNNING, START, HealthSettings(startup_s=1000), None,
         Finding("stalled", 0, "no step reported for 2000 s (allowance 1000 s) while RUNNING")),
        (JobState("PENDING"), [], HealthSettings(), None, None),
        (RUNNING, [], HealthSettings(), None, None),  # no attempt recorded yet: nothing to measure from
    ],
)  # fmt: skip
def test_judge(
    state: JobState, records: list[dict[str, Any]], health: HealthSettings, step_t: float | None, expected: Any
) -> None:
    assert judge(state, RunHistory.from_records(records), health, step_t, NOW) == expected


def test_a_finding_is_recorded_once_per_attempt_and_kind(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    finding = Finding("stalled", 0, "no progress for 400 s")
    assert act(layout, history.load(layout.events), finding)
    assert not act(layout, history.load(layout.events), finding)
    assert act(layout, history.load(layout.events), Finding("stalled", 1, "again, next attempt"))
    found = history.load(layout.events).all(WatchFound)
    assert [(e.attempt, e.kind) for e in found] == [(0, "stalled"), (1, "stalled")]
