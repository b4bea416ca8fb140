"""Batch-shell decisions against a real run directory: preempt requests, signal fan-out, recorded outcomes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from clitools import events as records

from ddpctl.node.batch import (
    decide_run,
    on_signal,
    request_kind,
    requested_kind,
    run_outcome,
    wait_for_launchers,
)
from ddpctl.node.localenv import LOCAL_ENV_FLAG
from ddpctl.run import history
from ddpctl.run.history import NodeExited, NodeLost, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import run_spec
from ddpctl.spec import JobSpec, spec_to_mapping


def run_dir(tmp_path: Path, **fields: object) -> RunLayout:
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    spec = JobSpec(name="x", script="t.py", nodes=3, **fields)  # type: ignore[arg-type]
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec)))
    return layout


def test_fresh_request_names_the_kind_once(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    layout.preempt_request.write_text(json.dumps({"kind": "timeout", "t": time.time()}))
    assert requested_kind(layout) == "timeout"
    assert requested_kind(layout) is None  # consumed


def test_stale_or_garbled_request_is_ignored_and_consumed(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    layout.preempt_request.write_text(json.dumps({"kind": "timeout", "t": 1000.0}))
    assert requested_kind(layout, now=1000.0 + 61) is None
    assert not layout.preempt_request.exists()
    layout.preempt_request.write_text("{not json")
    assert requested_kind(layout) is None


def test_on_signal_touches_every_nodes_stop_file_and_fans_out(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    sent: list[str] = []
    event = on_signal(layout, {"SLURM_RESTART_COUNT": "2"}, "USR2", lambda: 100, sent.append)
    assert sent == ["USR2"]
    assert (event.kind, event.attempt, event.time_left_s) == ("timeout", 2, 100)
    assert all(layout.stop_file(2, node).exists() for node in range(3))


def test_the_fan_out_waits_for_every_launcher_to_arm_and_no_longer_than_its_bound(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    layout.node_info(1, 0).parent.mkdir(parents=True)
    layout.node_info(1, 0).write_text("{}")
    began = time.monotonic()
    assert not wait_for_launchers(layout, 1, 3, timeout_s=0.3)  # nodes 1 and 2 never armed
    assert 0.3 <= time.monotonic() - began < 2
    late = threading.Timer(0.3, lambda: [layout.node_info(1, r).write_text("{}") for r in (1, 2)])
    late.start()
    began = time.monotonic()
    assert wait_for_launchers(layout, 1, 3, timeout_s=10)
    assert time.monotonic() - began < 5  # returned once they armed, not at the bound
    late.join()


def test_decide_records_a_requeue_for_a_stopped_run(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    on_signal(layout, {}, "USR2", lambda: None, lambda _name: None)
    layout.stopped_marker(0).write_text(json.dumps({"step": 7}))
    decision = decide_run(layout, {}, 0)
    assert (decision.action, decision.kind) == ("requeue", "preemption")
    recorded = [e for e in records(layout.root) if e["event"] == "decision"]
    assert recorded[-1]["action"] == "requeue" and recorded[-1]["stopped"] is True


def test_the_run_spec_is_parsed_once_per_process(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    on_signal(layout, {}, "USR2", lambda: None, lambda _name: None)
    layout.spec_file.unlink()  # the decision must not read job.yaml again
    decision = decide_run(layout, {}, 0)
    assert (decision.action, decision.reason) == ("finish", "training completed")
    assert run_spec(layout) is run_spec(layout)


def test_the_outcome_comes_from_the_events_the_caller_read(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)  # no events.jsonl at all: run_outcome must use the history it is given
    past = RunHistory.from_records(
        [
            {"event": "signal", "attempt": 1, "kind": "timeout"},
            {"event": "node-exit", "node": "n1", "attempt": 1, "exit": 3},
            {"event": "signal", "attempt": 0, "kind": "preemption"},
        ]
    )
    outcome = run_outcome(layout, past, 1, 143)
    assert (outcome.exit_code, outcome.stopped, outcome.signal_kind) == (3, False, "timeout")
    assert outcome.blame is not None and outcome.blame.cause == "script-error"


def test_a_lost_node_is_the_attempts_cause_and_charged_to_node_failures(tmp_path: Path) -> None:
    # The launchers' node-lost record, not the step's status (srun killed by the batch shell: 137), nor a hang
    # found meanwhile, says what ended the attempt; max_failures (0) is not touched.
    layout = run_dir(tmp_path)
    layout.attempt_dir(0).mkdir()
    layout.hang_marker(0).write_text("{}")
    layout.node_lost_marker(0).write_text(json.dumps({"node": "n2"}))
    history.append(layout.events, NodeLost(attempt=0, node="n2", node_rank=1, why="its heartbeat stopped 16 s ago"))
    history.append(layout.events, NodeExited(node="n1", attempt=0, exit=1))  # its ranks died of the reset
    assert run_outcome(layout, history.load(layout.events), 0, 137).infra_cause == "node-lost"
    decision = decide_run(layout, {}, 137)
    assert decision.blame is not None
    assert (decision.blame.cause, decision.blame.node) == ("node-lost", "n2")
    assert (decision.action, decision.kind, decision.reason) == (
        "requeue",
        "node_failure",
        "node_failure (node-lost): requeue 1 of 5",
    )


def test_request_kind_is_what_requested_kind_reads(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    request_kind(layout, "timeout")
    assert requested_kind(layout) == "timeout"


def test_attempt_start_names_the_job_by_its_run_dir_id_and_records_an_unheard_stop(tmp_path: Path) -> None:
    from ddpctl.node.batch import batch_start

    layout = RunLayout(tmp_path / "local-7")  # the local backend's job id; its SLURM_JOB_ID is 7
    layout.root.mkdir()
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(JobSpec(name="x", script="t.py"))))
    batch_start(layout, {"SLURM_JOB_ID": "7", "DDPCTL_LOCAL": "1"})
    on_signal(layout, {}, "USR2", lambda: None, lambda _name: None)
    # Killed before anything was recorded; the next attempt says what became of the stop, once.
    batch_start(layout, {"SLURM_JOB_ID": "7", "DDPCTL_LOCAL": "1", "SLURM_RESTART_COUNT": "1"})
    events = list(records(layout.root))
    starts = [(e["job_id"], e["checkpoints_present"]) for e in events if e["event"] == "attempt-start"]
    assert starts == [("local-7", False), ("local-7", False)]
    unheard = [(e["attempt"], e["killed"], e["listeners"]) for e in events if e["event"] == "stop-unacknowledged"]
    assert unheard == [(0, True, [])]


NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1799999990.123456", 1799999990.123456),  # bash's $EPOCHREALTIME
        ("1799999990,123456", 1799999990.123456),  # ... in a locale with a decimal comma
        (" 1799999999 ", 1799999999.0),
        ("1800000000.5", 1800000000.5),  # a clock a little ahead of ours
        ("1800000002", None),  # in the future
        ("1799990000", None),  # hours before: not this start
        ("", None),  # bash < 5 has no $EPOCHREALTIME
        ("nan", None),
        ("inf", None),
        ("yesterday", None),
    ],
)
def test_start_time_takes_a_plausible_shell_clock_reading(text: str, expected: float | None) -> None:
    from ddpctl.node.batch import start_time

    assert start_time(text, NOW) == expected


def test_attempt_start_is_dated_when_the_shell_started_it_not_when_the_niced_record_ran(tmp_path: Path) -> None:
    from ddpctl.node.batch import batch_start

    layout = RunLayout(tmp_path / "9")
    layout.root.mkdir()
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(JobSpec(name="x", script="t.py"))))
    shell_time = time.time() - 4.25
    batch_start(layout, {"SLURM_JOB_ID": "9"}, at=f"{shell_time:.6f}")
    batch_start(layout, {"SLURM_JOB_ID": "9", "SLURM_RESTART_COUNT": "1"}, at="garbage")
    first, second = (e for e in records(layout.root) if e["event"] == "attempt-start")
    assert first["t"] == round(shell_time, 3)
    assert abs(second["t"] - time.time()) < 5  # an unusable reading: the record's own time


def test_attempt_start_waits_for_a_run_dir_submit_has_not_renamed_yet(tmp_path: Path) -> None:
    """The job is not held: its batch shell (a user's own template need not wait) may run `internal batch-start`
    before submit renames the staging dir to the job id. batch-start must wait, not create <job id>/ itself
    (submit's rename onto it would then fail and cancel the job)."""
    import threading

    from ddpctl.node.batch import batch_start

    stage, layout = RunLayout(tmp_path / ".staging-x"), RunLayout(tmp_path / "4242")
    stage.root.mkdir()
    stage.spec_file.write_text(yaml.safe_dump(spec_to_mapping(JobSpec(name="x", script="t.py"))))
    commit = threading.Timer(0.4, stage.root.rename, [layout.root])
    commit.start()
    batch_start(layout, {"SLURM_JOB_ID": "4242"})
    commit.join()
    assert not stage.root.exists()
    assert [e["event"] for e in records(layout.root)] == ["attempt-start"]


def test_wait_for_run_dir_is_bounded(tmp_path: Path) -> None:
    from ddpctl.run.rundir import wait_for_run_dir

    t0 = time.monotonic()
    assert wait_for_run_dir(RunLayout(tmp_path / "4242"), timeout_s=0.3) is False
    assert 0.3 <= time.monotonic() - t0 < 2
    assert not (tmp_path / "4242").exists()


def starts(layout: RunLayout) -> list[dict[str, object]]:
    return [e for e in records(layout.root) if e["event"] == "attempt-start"]


@pytest.mark.parametrize(
    ("node_rank", "env", "recorded"),
    [
        (0, {"DDPCTL_ATTEMPT_AT": "SHELL", "DDPCTL_BATCH_HOST": "node7"}, True),  # the template's step, node 0
        (1, {"DDPCTL_ATTEMPT_AT": "SHELL"}, False),  # one record per attempt: node 0's
        (0, {}, False),  # a template of one's own runs `internal batch-start` itself
        (0, {"DDPCTL_ATTEMPT_AT": "SHELL", LOCAL_ENV_FLAG: "1"}, False),  # the local supervisor records it
    ],
)
def test_node_0s_launcher_records_the_attempt_start_the_shell_dated(
    tmp_path: Path, node_rank: int, env: dict[str, str], recorded: bool
) -> None:
    from ddpctl.node.launch import record_attempt_start
    from ddpctl.slurm.env import DistEnv

    layout = run_dir(tmp_path)
    shell_time = time.time() - 2.5
    env = {k: f"{shell_time:.6f}" if v == "SHELL" else v for k, v in env.items()}
    slurm = {"SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "node[7-9]"}
    hosts = ("node7", "node8", "node9")
    dist = DistEnv("node7", 29500, node_rank, 3, 1, 3, "12.0", 0, "12", hosts[node_rank], hosts)
    record_attempt_start(layout, dist, {**slurm, **env})
    if not recorded:
        assert starts(layout) == []
        return
    (start,) = starts(layout)
    assert start["t"] == round(shell_time, 3) and start["batch_host"] == "node7" and start["job_id"] == "12"


def test_decide_records_the_start_only_where_no_launcher_did(tmp_path: Path) -> None:
    layout = run_dir(tmp_path)
    shell_time = time.time() - 3.0
    env = {"SLURM_JOB_ID": "12", "DDPCTL_ATTEMPT_AT": f"{shell_time:.6f}"}
    decide_run(layout, env, 1)  # no launcher ran (e.g. srun could not start the step): decide records the start
    decide_run(layout, {**env, "SLURM_RESTART_COUNT": "1"}, 0)
    decide_run(layout, {**env, "SLURM_RESTART_COUNT": "1"}, 0)  # attempt 1 is recorded once
    assert [(e["attempt"], e["t"]) for e in starts(layout)] == [(0, round(shell_time, 3)), (1, round(shell_time, 3))]
    decide_run(layout, {"SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": "2"}, 0)  # no shell time: a template's own
    assert [e["attempt"] for e in starts(layout)] == [0, 1]
