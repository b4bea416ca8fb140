"""The catalog knows every event type by its on-disk name (it finds them in the modules that define them)."""

from __future__ import annotations

from ddpctl.run.history import TYPES, Decided, NodeLost, SpareRestarted, parse_event

NAMES = {
    "submit", "requeue-mode", "attempt-start", "launch", "stop-signal", "signal", "stop", "stop-unacknowledged",
    "stop-killed", "stop-scan", "resume", "checkpoint_skipped", "decision", "cancelled", "chain-submit", "chain-drop",
    "spare-restart", "node-exit", "rank-exit", "oom", "hang", "node-lost", "preflight", "straggler", "node-excluded",
    "notify-failed", "watch-found", "slowdown", "node-check",
    "resume-point", "scratch-restart", "checkpoint-rotated",
}  # fmt: skip


def test_every_event_type_is_known_by_its_name() -> None:
    assert set(TYPES) == NAMES
    assert all(name == cls.NAME for name, cls in TYPES.items())
    assert (TYPES["decision"], TYPES["node-lost"], TYPES["spare-restart"]) == (Decided, NodeLost, SpareRestarted)


def test_a_line_reads_back_as_its_type_and_an_unknown_one_as_nothing() -> None:
    record = {"event": "spare-restart", "t": 1.0, "attempt": 0, "next_attempt": 1, "job_id": "7", "nodes": ["n1"]}
    assert parse_event(record) == SpareRestarted(t=1.0, attempt=0, next_attempt=1, job_id="7", nodes=("n1",))
    assert parse_event({"event": "no-such-event", "attempt": 0}) is None
    assert parse_event(["not", "a", "mapping"]) is None
