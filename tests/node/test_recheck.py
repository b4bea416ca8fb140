"""A node's checks during training (issue 46 item 5, `health.node_check_every_min`): when one is due and what its
end means — literal tables; then the launcher's thread for real, with the check program on this machine: a failed
check ends the attempt in its own words, a hanging one is killed at its bound while a beside thread keeps its beat,
and a command that cannot start is told once, not counted."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ddpctl.health.report import describe_recheck
from ddpctl.node.blame import Facts, blame, facts_of
from ddpctl.node.decide import RunOutcome, decide
from ddpctl.node.recheck import Recheck, Verdict, due, verdict
from ddpctl.node.torchrun import NodePlan
from ddpctl.run import history
from ddpctl.run.history import INFRASTRUCTURE_CAUSES, NodeRechecked, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import HealthSettings, JobSpec, RequeuePolicy

DIST = DistEnv("n1", 29500, 1, 3, 2, 6, "r", 0, "7", "n2", ("n1", "n2", "n3"))  # node n2, node rank 1
EVERY = 300.0


@pytest.mark.parametrize(
    ("now", "since", "ending", "expected"),
    [
        (0.0, 0.0, False, False),  # torchrun just started: the first check is N minutes later
        (299.9, 0.0, False, False),
        (300.0, 0.0, False, True),
        (900.0, 0.0, False, True),  # late (a slow check before): one now, never a burst to catch up
        (400.0, 350.0, False, False),  # counted from the previous check's end, not its start
        (650.0, 350.0, False, True),
        (900.0, 0.0, True, False),  # a stop, a hang or a lost node: the attempt is ending, no new check
    ],
)
def test_when_a_check_is_due(now: float, since: float, ending: bool, expected: bool) -> None:
    assert due(now, since, EVERY, ending) is expected
    # A check asked for at torchrun's start (a new node beside proven ones) is due at once, unless ending.
    assert due(now, since, EVERY, ending, first=True) is not ending


SITE_WHY = "node_check exited 1; last output: ECC"
OK: dict[str, Any] = {"ok": True, "stage": "", "why": "", "output": [], "seconds": 0.2}
SITE: dict[str, Any] = {"ok": False, "stage": "site", "why": SITE_WHY, "output": ["ECC"], "seconds": 1}
DISK: dict[str, Any] = {"ok": False, "stage": "hardware", "why": "/ckpt is not writable", "seconds": 0.3}
NOT_FOUND = "node_check exited 127; last output: sh: 1: dcgmi: not found"
UNSTARTED = {**OK, "unstarted": NOT_FOUND}
BOTH = {**DISK, "unstarted": NOT_FOUND}
NO_RESULT = "the check exited {} without a result (the attempt's recheck-node-*.log says why)"


@pytest.mark.parametrize(
    ("status", "record", "ran_before", "expected"),
    [
        (0, OK, False, Verdict("pass", ran=True)),
        (1, SITE, False, Verdict("fail", "site", SITE_WHY, ran=True)),
        (1, SITE, True, Verdict("fail", "site", SITE_WHY, ran=True)),
        (1, DISK, False, Verdict("fail", "hardware", "/ckpt is not writable", ran=True)),
        (None, None, False, Verdict("fail", "timeout", "the check outlived its bound (180 s) and was killed")),
        (None, OK, True, Verdict("fail", "timeout", "the check outlived its bound (180 s) and was killed")),
        (-15, None, True, Verdict("none")),  # a signal the launcher did not send: the job's own end
        (-9, SITE, False, Verdict("none")),
        # The site's command could not start: the spec's, alike everywhere, until it has run on this node.
        (0, UNSTARTED, False, Verdict("unrun", "start", NOT_FOUND)),
        (0, UNSTARTED, True, Verdict("fail", "start", NOT_FOUND)),
        (1, BOTH, False, Verdict("fail", "hardware", "/ckpt is not writable")),  # a built-in fault still counts
        # The check program itself ended without a result (or with one that contradicts its status).
        (1, None, False, Verdict("unrun", "start", NO_RESULT.format(1))),
        (1, None, True, Verdict("fail", "start", NO_RESULT.format(1))),
        (0, SITE, False, Verdict("unrun", "start", NO_RESULT.format(0))),
        (1, {"ok": "yes", "seconds": 1}, True, Verdict("fail", "start", NO_RESULT.format(1))),
        (1, {**SITE, "stage": "gpu"}, False, Verdict("fail", "start", SITE_WHY, ran=True)),  # not a stage it has
    ],
)  # fmt: skip
def test_what_a_checks_end_means(
    status: int | None, record: dict[str, Any] | None, ran_before: bool, expected: Verdict
) -> None:
    assert verdict(status, record, ran_before, 180.0) == expected


def failed_check(node: str = "n2", failed: bool = True) -> NodeRechecked:
    why = "node_check exited 1; last output: GPU 0: 3 uncorrectable ECC errors"
    return NodeRechecked(attempt=0, node=node, node_rank=1, failed=failed, stage="site", why=why)


def test_a_failed_check_blames_its_node_charged_to_node_failures_and_never_repeats() -> None:
    assert "node-check" in INFRASTRUCTURE_CAUSES  # excluded at once, and the next attempt's auto preflight runs
    found = blame(Facts(exit_code=1, rechecks=(failed_check(),)))
    assert found is not None
    assert (found.cause, found.node, found.rank) == ("node-check", "n2", None)
    assert found.why == "site: node_check exited 1; last output: GPU 0: 3 uncorrectable ECC errors"
    outcome = RunOutcome(exit_code=1, stopped=False, signal_kind="preemption", blame=found)
    decision = decide(outcome, RequeuePolicy(), {})
    assert (decision.action, decision.kind) == ("requeue", "node_failure")  # a signal after it changes nothing
    # Read from the attempt's events: only a failed check counts, a check that could not run never does.
    past = RunHistory((failed_check("n3", failed=False), failed_check("n2")))
    facts = facts_of(past.attempt(0), 1, False)
    assert [e.node for e in facts.rechecks] == ["n2"]
    assert blame(Facts(exit_code=0, rechecks=(failed_check(),))) is None  # the run completed meanwhile


def test_status_and_logs_say_the_checks_words() -> None:
    assert describe_recheck(failed_check()) == (
        "node check in attempt 0 on n2 failed: site: node_check exited 1; last output: GPU 0: 3 uncorrectable ECC"
        " errors; the attempt was ended, blaming the node"
    )
    assert describe_recheck(failed_check(failed=False)).endswith("could not run: node_check exited 1; last output:"
                                                                 " GPU 0: 3 uncorrectable ECC errors; not counted"
                                                                 " as a failure")  # fmt: skip


def thread_for(tmp_path: Path, command: str | None, timeout_s: int = 10) -> tuple[Recheck, list[str]]:
    health = HealthSettings(node_check=command, node_check_timeout_s=timeout_s, node_check_every_min=0.05)
    spec = JobSpec(name="x", script="t.py", health=health)
    layout = RunLayout(tmp_path / "run")
    layout.attempt_dir(DIST.restart_count).mkdir(parents=True)
    ended: list[str] = []
    plan = NodePlan((sys.executable,), (("DDPCTL_NODE", DIST.node_name),))
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "HOME")}
    thread = Recheck(spec, DIST, layout, plan, env, end_attempt=lambda: ended.append("ended"), ending=lambda: False)
    return thread, ended


def test_a_failed_check_is_recorded_in_its_own_words_and_ends_the_attempt(tmp_path: Path) -> None:
    thread, ended = thread_for(tmp_path, "echo checking; echo 'GPU 0: row remap failed' >&2; exit 4")
    thread.once()
    assert ended == ["ended"]
    events = history.load(thread.layout.events).events
    why = "node_check exited 4; last output: GPU 0: row remap failed"
    found = [(e.failed, e.stage, e.why, e.output) for e in events if isinstance(e, NodeRechecked)]
    assert found == [(True, "site", why, ("checking", "GPU 0: row remap failed"))]
    log = (thread.layout.attempt_dir(0) / f"recheck-node-{DIST.node_rank}.log").read_text()
    assert "GPU 0: row remap failed" in log


def test_a_command_that_cannot_start_is_told_once_and_a_passing_check_says_nothing(tmp_path: Path) -> None:
    thread, ended = thread_for(tmp_path, "no-such-node-check-command --quick")
    thread.once()
    thread.once()
    assert ended == []
    found = [e for e in history.load(thread.layout.events).events if isinstance(e, NodeRechecked)]
    assert [(e.failed, e.stage) for e in found] == [(False, "start")]
    assert "127" in found[0].why and "not found" in found[0].why, found
    passing, ended = thread_for(tmp_path / "ok", "true")
    passing.once()
    assert (ended, passing.ran, passing.checks) == ([], True, 1)
    assert not passing.layout.events.exists() or not history.load(passing.layout.events).events


def test_a_hanging_check_is_killed_at_its_bound_while_the_launchers_beat_goes_on(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # The site's command has a bound of its own (checkprog kills it); here the check program itself hangs (a
    # statvfs on a dead filesystem): the launcher's bound ends it.
    thread, ended = thread_for(tmp_path, None)
    thread.bound_s = 2.0
    hang = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    thread.argv = [sys.executable, "-c", hang]
    beats: list[float] = []
    stop = threading.Event()

    def beat() -> None:  # the launcher's heartbeat thread, as ddpctl.health.peers runs it
        while not stop.wait(0.05):
            beats.append(time.monotonic())

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    started = time.monotonic()
    thread.once()
    took = time.monotonic() - started
    stop.set()
    beater.join()
    gaps = [b - a for a, b in itertools.pairwise(beats)]
    print(f"hanging check killed after {took:.2f} s (bound 2 s); beat gaps max {max(gaps):.3f} s over {len(gaps)}")
    assert 2.0 <= took < 4.0
    assert max(gaps) < 0.5
    assert ended == ["ended"]
    event = next(e for e in history.load(thread.layout.events).events if isinstance(e, NodeRechecked))
    assert (event.stage, event.why) == ("timeout", "the check outlived its bound (2 s) and was killed")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # killed by pid, and reaped


def test_the_thread_checks_on_schedule_and_stops_with_torchrun(tmp_path: Path) -> None:
    thread, ended = thread_for(tmp_path, "true")
    thread.every_s = 0.5
    thread.start()
    time.sleep(2.4)
    thread.stop()
    assert ended == [] and 1 <= thread.checks <= 4, thread.checks
    assert not thread._thread.is_alive()


def test_a_new_nodes_check_runs_once_at_torchruns_start_without_periodic_checks(tmp_path: Path, capsys: Any) -> None:
    thread, ended = thread_for(tmp_path, "true")
    thread.every_s, thread.at_start = 0.0, True  # node_check_every_min unset: only the check at the start
    started = time.monotonic()
    thread.start()
    thread._thread.join(timeout=30)
    assert not thread._thread.is_alive() and thread.checks == 1 and ended == []
    assert time.monotonic() - started < 30
    assert "node check beside torchrun passed in" in capsys.readouterr().out
    failing, ended = thread_for(tmp_path / "bad", "exit 3")
    failing.every_s, failing.at_start = 0.0, True
    failing.start()
    failing._thread.join(timeout=30)
    assert ended == ["ended"] and failing.failed is not None and failing.failed.stage == "site"
