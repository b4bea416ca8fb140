"""ddpctl.run.history: the event schema (literal records in, typed events out, the same lines written as before),
the questions asked of a run's past (literal event tables), and how a process reads a run's log (each byte once;
one read per question, counted on the log's own `reads`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ddpctl.node.batch import decide_run, on_signal
from ddpctl.run import history
from ddpctl.run.history import (
    AttemptStarted,
    Decided,
    Event,
    Hung,
    Launched,
    NodeExited,
    RunHistory,
    Signalled,
    Stopped,
    StopUnacknowledged,
    StragglerFlagged,
)
from ddpctl.run.history.log import CHECK_BYTES, MAX_LINE_BYTES
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, spec_to_mapping

# Each typed event beside the record the writer wrote before the schema existed (`append_event(path, NAME,
# **fields)`: {"t", "event", **fields}): the lines on disk must not change.
WRITTEN: list[tuple[Event, dict[str, Any]]] = [
    (
        Decided(
            t=5.0, attempt=2, step_exit=143, stopped=True, action="requeue", kind="timeout", reason="r", exit_code=0
        ),
        {"event": "decision", "attempt": 2, "step_exit": 143, "stopped": True, "action": "requeue", "kind": "timeout"}
        | {"reason": "r", "exit_code": 0, "t": 5.0},
    ),
    (
        Decided(t=5.0, attempt=0, step_exit=0, stopped=False, action="finish", kind=None, reason="done", exit_code=0),
        {"event": "decision", "attempt": 0, "step_exit": 0, "stopped": False, "action": "finish", "kind": None}
        | {"reason": "done", "exit_code": 0, "t": 5.0},
    ),
    (
        Signalled(t=1.5, attempt=0, signal="USR2", kind="preemption", time_left_s=None),
        {"event": "signal", "t": 1.5, "attempt": 0, "signal": "USR2", "kind": "preemption", "time_left_s": None},
    ),
    (
        Stopped.from_marker(
            {"step": 7, "checkpoint": "/c/7", "signal_time": 1.0, "source": "signal", "attempt": 0, "world_size": 4}
        ),
        {"event": "stop", "t": None, "step": 7, "checkpoint": "/c/7", "signal_time": 1.0, "source": "signal"}
        | {"attempt": 0, "world_size": 4},
    ),
    (
        Stopped.from_marker(
            {"step": None, "checkpoint": None, "checkpoint_mtime": None, "signal_time": None, "source": "script"}
            | {"attempt": 1}
        ),
        {"event": "stop", "t": None, "step": None, "checkpoint": None, "checkpoint_mtime": None, "signal_time": None}
        | {"source": "script", "attempt": 1},
    ),
    (
        StopUnacknowledged(t=2.0, attempt=0, waited_s=60, listeners=("rank 0: x",)),
        {"event": "stop-unacknowledged", "t": 2.0, "attempt": 0, "waited_s": 60, "listeners": ["rank 0: x"]},
    ),
    (
        StopUnacknowledged(t=2.0, attempt=0, waited_s=None, listeners=(), killed=True),
        {"event": "stop-unacknowledged", "t": 2.0, "attempt": 0, "waited_s": None, "listeners": [], "killed": True},
    ),
    (
        Launched(t=3.0, node="n1", attempt=0, dist={"MASTER_PORT": "1"}, argv=("torchrun",), gpus=({"cuda": 0},)),
        {"event": "launch", "t": 3.0, "node": "n1", "attempt": 0, "dist": {"MASTER_PORT": "1"}, "argv": ["torchrun"]}
        | {"gpus": [{"cuda": 0}], "cuda_visible_devices": None},
    ),
    (
        AttemptStarted(t=4.0, attempt=1, job_id="7", nodes="n[1-2]", batch_host="n1", checkpoints_present=None),
        {"event": "attempt-start", "t": 4.0, "attempt": 1, "job_id": "7", "nodes": "n[1-2]", "batch_host": "n1"}
        | {"checkpoints_present": None},
    ),
]


@pytest.mark.parametrize(("event", "record"), WRITTEN)
def test_events_are_written_as_the_records_before_them(tmp_path: Path, event: Event, record: dict[str, Any]) -> None:
    written = history.append(tmp_path / "log", event)
    line = (tmp_path / "log").read_text()
    expected = {**record, "t": written.t}
    assert line == json.dumps(expected, sort_keys=True) + "\n"
    assert history.parse_event(json.loads(line)) == written  # and read back as the same event


FINISHED = Decided(attempt=0, action="finish")


@pytest.mark.parametrize(
    ("record", "parsed"),
    [
        ({"event": "decision", "attempt": 0, "action": "requeue"}, Decided(attempt=0, action="requeue")),
        ({"event": "cancelled", "attempt": 3, "new_field": 1}, history.Cancelled(attempt=3)),  # a newer ddpctl's
        ({"event": "future-event", "attempt": 0}, None),
        ({"event": "decision", "action": "requeue"}, None),  # no attempt
        ({"event": "decision", "attempt": "0", "action": "requeue"}, None),
        ({"event": "decision", "attempt": True, "action": "requeue"}, None),  # JSON true is no attempt number
        ({"event": "decision", "attempt": 0, "action": "explode"}, None),
        (
            {"event": "decision", "attempt": 0, "action": "finish", "kind": "meteor"},
            Decided(attempt=0, action="finish"),
        ),
        (
            {"event": "decision", "attempt": 0, "action": "finish", "exit_code": "0"},
            Decided(attempt=0, action="finish"),
        ),
        ({"event": "signal", "attempt": 1, "time_left_s": 1.5}, Signalled(attempt=1)),
        ({"event": "hang", "attempt": 0, "culprits": [{"rank": 1}, 7]}, Hung(attempt=0)),
        ({"event": "hang", "attempt": 0, "culprits": [{"rank": 1}]}, Hung(attempt=0, culprits=({"rank": 1},))),
        ({"event": "straggler", "attempt": 0, "rank": 2, "factor": 2}, StragglerFlagged(attempt=0, rank=2, factor=2)),
        ({"event": ["decision"], "attempt": 0}, None),
        (["decision"], None),
        ("decision", None),
        (None, None),
    ],
)
def test_untrusted_records_are_typed_or_skipped(record: object, parsed: Event | None) -> None:
    assert history.parse_event(record) == parsed


# An events.jsonl as ddpctl 0.2 left it for a run preempted once, then failed, on a chain: every question's answer.
OLD_RUN = [
    {"event": "submit", "t": 10.0, "job_id": "10", "backend": "sbatch", "spec": "/j.yaml"},
    {"event": "requeue-mode", "t": 10.1, "mode": "chain", "why": "JobRequeue=0"},
    {"event": "attempt-start", "t": 20.0, "attempt": 0, "job_id": "10", "nodes": "n[1-2]", "batch_host": "n1"},
    {"event": "signal", "t": 50.0, "attempt": 0, "signal": "USR2", "kind": "preemption", "time_left_s": 900},
    {"event": "chain-submit", "t": 50.5, "attempt": 0, "job_id": "11", "predecessor": "10", "next_attempt": 1},
    {"event": "stop", "t": 55.0, "attempt": 0, "step": 7, "checkpoint": "/c", "signal_time": 50.0, "source": "x"},
    {"event": "node-exit", "t": 56.0, "node": "n2", "attempt": 0, "torchrun_exit": 0, "exit": 0, "stopped": True},
    {"event": "decision", "t": 57.0, "attempt": 0, "action": "requeue", "kind": "preemption", "exit_code": 0},
    {"event": "attempt-start", "t": 200.0, "attempt": 1, "job_id": "11", "nodes": "n[3-4]"},
    {"event": "resume", "t": 210.0, "attempt": 1, "step": 7, "checkpoint": "/c"},
    {"event": "oom", "t": 230.0, "node": "n4", "attempt": 1, "kills": 1, "limit_bytes": None},
    {"event": "node-exit", "t": 231.0, "node": "n4", "attempt": 1, "torchrun_exit": 1, "exit": 1, "hang": False},
    {"event": "decision", "t": 232.0, "attempt": 1, "action": "finish", "kind": "failure", "exit_code": 1}
    | {"reason": "failure budget spent"},
]


def test_every_question_about_an_old_run() -> None:
    past = RunHistory.from_records(OLD_RUN)
    assert len(past.events) == len(OLD_RUN)
    assert list(past.attempts) == [0, 1]
    assert past.requeues_used(2) == {"preemption": 1, "timeout": 0, "failure": 0, "node_failure": 0}
    assert past.restarts() == 1
    assert past.chain_jobs("10") == ["10", "11"] and past.successor_of(0) == "11"
    assert past.finished_before(2) == past.outcome() and past.finished_before(1) is None
    state = past.final_state()
    assert state is not None and (state.state, state.restarts, state.exit_code) == ("FAILED", 1, 1)
    assert past.attempt(0).signal_kind == "preemption" and past.attempt(1).signal_kind is None
    assert past.attempt(1).node_exits == [1] and not past.attempt(1).hung
    assert [type(e).__name__ for e in past.health()] == ["OomKilled"] and past.health(0) == []
    assert past.span() == (20.0, 232.0, "n[3-4]")
    assert past.ended(0) and past.ended(1) and not past.ended(2)
    assert not past.cancelled() and past.excluded_nodes() == frozenset()
    assert past.unacknowledged_unrecorded(0) and not past.unacknowledged_unrecorded(1)


def test_an_attempt_slurm_requeued_itself_is_charged_to_its_last_classified_signal() -> None:
    past = RunHistory.from_records(
        [
            {"event": "signal", "attempt": 0, "kind": "timeout"},
            {"event": "signal", "attempt": 0, "kind": None},  # unclassified: the timeout stands
            {"event": "node-exit", "node": "n1", "attempt": 1, "exit": 0, "hang": True},
        ]
    )
    assert past.attempt(0).charged == "timeout" and past.attempt(1).charged == "preemption"
    assert past.attempt(1).hung
    assert past.requeues_used(2) == {"preemption": 1, "timeout": 1, "failure": 0, "node_failure": 0}


def line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record) + "\n").encode()


def grow(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def test_a_follower_reads_each_appended_byte_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = history.EventLog(path)
    assert log.history().events == () and log.reads == 1  # no log yet: no events
    first = line({"event": "cancelled", "attempt": 0})
    grow(path, first + b"garbage\n" + line({"event": "cancelled", "attempt": 1})[:9])  # the last one half-written
    assert [e.attempt for e in log.history().all(history.Cancelled)] == [0]
    assert log.bytes_read == path.stat().st_size
    grow(path, line({"event": "cancelled", "attempt": 1})[9:])
    before = log.bytes_read
    assert [e.attempt for e in log.history().all(history.Cancelled)] == [0, 1]
    assert log.bytes_read - before == len(line({"event": "cancelled", "attempt": 1}))  # the torn line again, whole
    assert log.reads == 3


def test_a_complete_last_line_without_newline_counts_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(line({"event": "cancelled", "attempt": 0}).rstrip(b"\n"))
    log = history.EventLog(path)
    assert len(log.history().events) == 1
    grow(path, b"\n" + line({"event": "cancelled", "attempt": 1}))
    assert [e.attempt for e in log.history().all(history.Cancelled)] == [0, 1]


def test_a_replaced_or_rewritten_log_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(line({"event": "cancelled", "attempt": 0, "pad": "x" * CHECK_BYTES}))
    log = history.EventLog(path)
    assert [e.attempt for e in log.history().all(history.Cancelled)] == [0]
    path.write_bytes(line({"event": "cancelled", "attempt": 5, "pad": "y" * (CHECK_BYTES + 10)}))  # same inode
    assert [e.attempt for e in log.history().all(history.Cancelled)] == [5]
    (tmp_path / "new").write_bytes(line({"event": "cancelled", "attempt": 6}))
    (tmp_path / "new").replace(path)  # another inode, shorter
    assert [e.attempt for e in log.history().all(history.Cancelled)] == [6]


def test_an_overlong_line_is_skipped_without_being_held(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    huge = line({"event": "cancelled", "attempt": 9, "pad": "z" * (MAX_LINE_BYTES * 2)})
    path.write_bytes(line({"event": "cancelled", "attempt": 0}) + huge + line({"event": "cancelled", "attempt": 1}))
    assert [e.attempt for e in history.EventLog(path).history().all(history.Cancelled)] == [0, 1]
    path.write_bytes(huge[:-1])  # still being written: neither an event nor an error
    assert history.EventLog(path).history().events == ()


def test_a_symlinked_log_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_bytes(line({"event": "cancelled", "attempt": 0}))
    (tmp_path / "events.jsonl").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match=r"events\.jsonl"):
        history.EventLog(tmp_path / "events.jsonl").history()


def run_dir(tmp_path: Path) -> RunLayout:
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(JobSpec(name="x", script="t.py", nodes=2))))
    return layout


def test_a_decision_reads_the_log_once(tmp_path: Path) -> None:
    """The costliest path: attempt 1's start not recorded by a launcher (decide records it) after an attempt 0
    that was signalled and never stopped (its unacknowledged stop is recorded too). ddpctl 0.2 read the log three
    times here."""
    layout = run_dir(tmp_path)
    on_signal(layout, {}, "USR2", lambda: None, lambda _name: None)
    log = history.log_of(layout.events)
    before = log.reads
    env = {"SLURM_RESTART_COUNT": "1", "DDPCTL_ATTEMPT_AT": "", "SLURM_JOB_ID": "5"}
    decision = decide_run(layout, env, 1)
    assert log.reads - before == 1
    past = history.load(layout.events)
    assert [type(e).__name__ for e in past.attempt(1).events] == ["AttemptStarted", "Decided"]
    assert past.attempt(0).first(StopUnacknowledged) is not None
    outcome = past.outcome()
    assert outcome is not None and (outcome.attempt, outcome.action) == (1, decision.action)


def test_node_exits_are_typed_for_the_decision() -> None:
    past = RunHistory((NodeExited(node="a", attempt=0, exit=0), NodeExited(node="b", attempt=0, exit=3)))
    assert past.attempt(0).node_exits == [0, 3]


def test_every_cause_has_one_class_and_the_cause_sets_are_read_from_it() -> None:
    """The cause classes are one table (run/history/base.CAUSE_CLASS); the sets blame, exclude, the preflight and
    the decision read are made from it, and no module spells a set of infrastructure causes again."""
    import ast

    from ddpctl.run.history import CAUSE_CLASS, CAUSES, INFRASTRUCTURE_CAUSES, RUN_ENDING_CAUSES

    assert set(CAUSE_CLASS) == set(CAUSES)
    assert {"node-lost", "hang", "rank-crash", "preflight", "node-check"} == INFRASTRUCTURE_CAUSES
    assert {"node-lost", "hang", "preflight", "node-check"} == RUN_ENDING_CAUSES
    package = Path(history.__file__).resolve().parents[2]
    spelled = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
                words = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if words <= set(CAUSES) and len(words & RUN_ENDING_CAUSES) >= 2 and path.name != "base.py":
                    spelled.append(f"{path.relative_to(package)}:{node.lineno}")
    assert spelled == []
