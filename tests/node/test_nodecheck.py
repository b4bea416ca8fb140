"""The nodes' preflight check (issue 26 item 7): when it runs, how its result is read, whom a failed one blames,
what it costs in `status` — literal tables; the check program itself runs for real on loopback."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ddpctl import safeio
from ddpctl.health.report import describe_checks
from ddpctl.node import checkprog, nodecheck
from ddpctl.node.blame import Blame, blame, facts_of
from ddpctl.node.decide import RunOutcome, decide
from ddpctl.run import history
from ddpctl.run.history import INFRASTRUCTURE_CAUSES, KINDS, Decided, Kind, Launched, NodeChecked, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import RequeuePolicy

DIST = DistEnv("n1", 29500, 1, 3, 2, 6, "r", 4, "7", "n2", ("n1", "n2", "n3"))


@pytest.mark.parametrize(
    ("setting", "previous", "expected"),
    [
        (None, None, False),  # auto: a run's first start is never delayed
        (None, "stop", False),
        (None, "script-error", False),
        (None, "oom", False),
        (None, "node-lost", True),  # auto: after an infrastructure failure
        (None, "hang", True),
        (None, "rank-crash", True),
        (None, "preflight", True),
        (True, None, True),
        (True, "stop", True),
        (False, "node-lost", False),
    ],
)
def test_when_the_nodes_check_themselves(setting: bool | None, previous: str | None, expected: bool) -> None:
    assert nodecheck.wanted(setting, previous) is expected
    choice = nodecheck.choose(setting, nodecheck.Previous(previous), "n2", ("n1", "n2"))
    assert choice.how == ("before" if expected else "skip") and choice.why == "", choice  # no node blamed


LOST_N3 = nodecheck.Previous("node-lost", "n3", frozenset({"n1", "n2"}))  # n1, n2 trained; n3 died
SKIP = "skipped: this node trained in the previous attempt, which n3 ended"
BESIDE = "beside torchrun: a new node in place of n3"


@pytest.mark.parametrize(
    ("setting", "previous", "node", "nodes", "expected"),
    [
        (None, LOST_N3, "n1", ("n1", "n4"), ("skip", SKIP)),  # a spare took n3's place: the survivor proved itself
        (None, LOST_N3, "n4", ("n1", "n4"), ("beside", BESIDE)),  # the spare checks beside torchrun
        (None, LOST_N3, "n1", ("n1", "n2"), ("skip", SKIP)),  # a 2-node successor on the survivors only
        (None, LOST_N3, "n1", ("n1", "n3"), ("before", "")),  # the blamed node is back: every node, before
        (None, LOST_N3, "n3", ("n1", "n3"), ("before", "")),
        (None, LOST_N3, "n4", ("n4", "n5"), ("before", "")),  # no node of the last attempt: the full check
        (True, LOST_N3, "n1", ("n1", "n4"), ("before", "")),  # `preflight: true`: every node, every attempt
        (False, LOST_N3, "n4", ("n1", "n4"), ("skip", "")),
        (None, nodecheck.Previous("stop", "n3", frozenset({"n1"})), "n4", ("n1", "n4"), ("skip", "")),
        (None, nodecheck.Previous("hang", None, frozenset()), "n1", ("n1", "n4"), ("before", "")),
    ],
)
def test_which_nodes_check_after_a_blamed_node_was_replaced(
    setting: bool | None, previous: nodecheck.Previous, node: str, nodes: tuple[str, ...], expected: tuple[str, str]
) -> None:
    choice = nodecheck.choose(setting, previous, node, nodes)
    assert (choice.how, choice.why) == expected


SITE_PASSED = nodecheck.Previous("node-lost", "n3", frozenset({"n1", "n2"}), site_passed=True)


@pytest.mark.parametrize(
    ("previous", "node", "expected"),
    [
        # A site command that never passed in the run: on the new node alone, one broken everywhere would blame it.
        (LOST_N3, "n1", ("before", "")),
        (LOST_N3, "n4", ("before", "")),
        (SITE_PASSED, "n1", ("skip", SKIP)),  # it passed in an earlier preflight: the new node alone, beside
        (SITE_PASSED, "n4", ("beside", BESIDE)),
    ],
)
def test_a_site_check_that_never_passed_runs_on_every_node_first(
    previous: nodecheck.Previous, node: str, expected: tuple[str, str]
) -> None:
    choice = nodecheck.choose(None, previous, node, ("n1", "n4"), site_check=True)
    assert (choice.how, choice.why) == expected


def test_the_previous_attempt_is_read_from_the_events(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    for event in (
        Launched(node="n1", attempt=0),
        Launched(node="n3", attempt=0),
        NodeChecked(attempt=0, node="n2", node_rank=2, ok=True),  # passed its check, another failed first
        NodeChecked(attempt=0, node="n5", node_rank=3, ok=False, stage="gpu"),
        Decided(attempt=0, action="requeue", kind="node_failure", cause="node-lost", cause_node="n3"),
        Launched(node="n9", attempt=1),
    ):
        history.append(layout.events, event)
    assert nodecheck.previous_of(layout, 0) == nodecheck.Previous()
    assert nodecheck.previous_of(layout, 1) == nodecheck.Previous("node-lost", "n3", frozenset({"n1", "n2"}), True)
    assert nodecheck.previous_of(layout, 2) == nodecheck.Previous()  # attempt 1 was not decided


PASSED = {"node_rank": 1, "ok": True, "stage": "", "why": "", "reached": True, "peers_ok": True, "seconds": 3.1}


@pytest.mark.parametrize(
    ("record", "status", "expected"),
    [
        (PASSED, 0, (True, "", True, True)),
        ({**PASSED, "peers_ok": False}, 1, (True, "", True, False)),  # another node failed: this one did not
        (
            {**PASSED, "ok": False, "stage": "gpu", "why": "2 GPUs visible, 4 needed", "peers_ok": False},
            1,
            (False, "gpu", True, False),
        ),
        (
            {**PASSED, "ok": False, "stage": "reach", "reached": False, "peers_ok": None},
            1,
            (False, "reach", False, None),
        ),
        # Killed by srun once another node failed: how far it got still counts, its verdict does not.
        ({"node_rank": 1, "ok": True, "stage": "", "why": "", "reached": False}, -15, (False, "killed", False, None)),
        (None, None, (False, "timeout", None, None)),  # the launcher's bound
        (None, 1, (False, "start", None, None)),  # no result at all
        ({"node_rank": 1, "ok": True, "stage": "", "why": "", "reached": True}, 1, (False, "start", True, None)),
        # A result that says it passed from a check that failed is not believed.
        (PASSED, 1, (False, "start", True, None)),
        # Untrusted types count for nothing.
        ({**PASSED, "ok": "yes", "reached": 1, "stage": ["gpu"]}, 0, (False, "start", None, None)),
        ({**PASSED, "stage": "rm -rf"}, 0, (True, "start", True, True)),
        ({**PASSED, "ok": False, "stage": "site", "peers_ok": False}, 1, (False, "site", True, False)),
        ({**PASSED, "ok": False, "stage": "hardware", "peers_ok": False}, 1, (False, "hardware", True, False)),
    ],
)
def test_the_result_file_is_read_with_how_the_check_ended(
    record: dict[str, Any] | None, status: int | None, expected: tuple[Any, ...]
) -> None:
    event = nodecheck.checked(DIST, record, status, 4.0)
    assert (event.ok, event.stage, event.reached, event.peers_ok) == expected
    assert (event.node, event.node_rank, event.attempt, event.seconds) == ("n2", 1, 4, 4.0)


def check(node: str, rank: int, ok: bool, stage: str = "", *, reached: bool | None = True) -> dict[str, Any]:
    peers_ok = None if stage else ok
    return {
        "event": "preflight",
        "attempt": 0,
        "node": node,
        "node_rank": rank,
        "ok": ok,
        "stage": stage,
        "why": f"{stage} failed" if stage else "",
        "reached": reached,
        "peers_ok": peers_ok,
        "seconds": 2.0,
    }


def collateral(node: str, rank: int) -> dict[str, Any]:
    """Passed itself; the all-reduce said another node failed."""
    return {**check(node, rank, True), "peers_ok": False}


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        pytest.param(
            [collateral("n1", 0), check("n2", 1, False, "gpu"), collateral("n3", 2)],
            Blame("preflight", "n2", None, "gpu: gpu failed"),
            id="a-node-without-its-gpus",
        ),
        pytest.param(
            [check("n1", 0, False, "gpu"), check("n2", 1, False, "gpu"), check("n3", 2, False, "gpu")],
            Blame("preflight", None, None, "gpu on every node: gpu failed; no one node is to blame"),
            id="no-node-has-gpus-the-setup-is-wrong",
        ),
        pytest.param(
            [
                check("n1", 0, False, "join"),
                check("n2", 1, False, "reach", reached=False),
                check("n3", 2, False, "join"),
            ],
            Blame("preflight", "n2", None, "reach: reach failed"),
            id="one-node-cannot-reach-node-0",
        ),
        pytest.param(
            [
                check("n1", 0, False, "join"),
                check("n2", 1, False, "reach", reached=False),
                check("n3", 2, False, "killed", reached=False),
            ],
            Blame("preflight", "n1", None, "none of the 2 other nodes could reach its store: reach failed"),
            id="nobody-reaches-node-0",
        ),
        pytest.param(
            # srun ended n1's and n3's checks once n2 failed: killed checks are no evidence against their nodes.
            [
                check("n1", 0, False, "killed"),
                check("n2", 1, False, "reach", reached=False),
                check("n3", 2, False, "killed"),
            ],
            Blame("preflight", "n2", None, "reach: reach failed"),
            id="killed-checks-are-not-local-failures",
        ),
        pytest.param(
            [check("n1", 0, False, "join"), check("n2", 1, False, "reach", reached=False)],
            Blame("preflight", None, None, "join: join failed; no one node is to blame"),
            id="two-nodes-cannot-tell-whose-link-is-down",
        ),
        pytest.param(
            [
                check("n1", 0, False, "allreduce"),
                check("n2", 1, False, "allreduce"),
                check("n3", 2, False, "allreduce"),
            ],
            Blame("preflight", None, None, "allreduce: allreduce failed; no one node is to blame"),
            id="all-reached-the-all-reduce-failed",
        ),
        pytest.param(
            [collateral("n1", 0), check("n2", 1, False, "site"), collateral("n3", 2)],
            Blame("preflight", "n2", None, "site: site failed"),
            id="the-sites-node-check-failed-on-one-node",
        ),
        pytest.param(
            [check("n1", 0, False, "hardware"), check("n2", 1, False, "hardware")],
            Blame("preflight", None, None, "hardware on every node: hardware failed; no one node is to blame"),
            id="every-node-fails-a-built-in-check-the-setup-is-wrong",
        ),
        pytest.param([check("n1", 0, True), check("n2", 1, True)], None, id="passed-then-completed"),
    ],
)
def test_a_failed_check_blames_the_node_at_fault(records: list[dict[str, Any]], expected: Blame | None) -> None:
    exits = [{"event": "node-exit", "attempt": 0, "node": r["node"], "exit": 1} for r in records]
    code = 0 if expected is None else 1
    attempt = RunHistory.from_records([*records, *exits]).attempt(0)
    assert blame(facts_of(attempt, code, False)) == expected


NONE_USED: dict[Kind, int] = dict.fromkeys(KINDS, 0)


def test_a_failed_check_is_an_infrastructure_failure_that_excludes_its_node() -> None:
    decision = decide(
        RunOutcome(1, False, None, blame=Blame("preflight", "n2", None, "gpu")), RequeuePolicy(), NONE_USED
    )
    assert (decision.kind, decision.action) == ("node_failure", "requeue")
    assert "preflight" in INFRASTRUCTURE_CAUSES
    # A preemption signal that came during the check does not turn it into a preemption.
    signalled = RunOutcome(1, False, "preemption", blame=Blame("preflight", "n2", None, "gpu"))
    assert decide(signalled, RequeuePolicy(), NONE_USED).kind == "node_failure"


def test_status_says_what_the_checks_cost_and_who_failed() -> None:
    def event(
        attempt: int, node: str, ok: bool, seconds: float, *, stage: str = "", peers_ok: bool | None = True
    ) -> Any:
        return NodeChecked(
            attempt=attempt,
            node=node,
            node_rank=0,
            ok=ok,
            stage=stage,
            why="x\x1b[31m",
            peers_ok=peers_ok,
            seconds=seconds,
        )

    lines = describe_checks(
        [
            event(1, "n0", False, 15.4, stage="join", peers_ok=None),
            event(1, "n1", True, 3.0, peers_ok=False),
            event(1, "n2", False, 15.5, stage="reach", peers_ok=None),
            event(2, "n1", True, 2.5),
            event(2, "n3", True, 3.25),
        ]
    )
    assert lines == [
        "preflight check, attempt 1: failed on n2 (reach: x^[[31m), n0 (join); torchrun not started (15.5 s)",
        "preflight check, attempt 2: 2 node(s) passed in 3.2 s",
    ]


def check_process(tmp_path: Path, nnodes: int, rank: int, timeout: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ddpctl.node.checkprog",
            f"--result={tmp_path}/r{rank}.json",
            f"--store-file={tmp_path}/store.json",
            "--master-addr=127.0.0.1",
            f"--node-rank={rank}",
            f"--nnodes={nnodes}",
            f"--timeout={timeout}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"},
    )


def run_checks(
    tmp_path: Path, nnodes: int, ranks: list[int], timeout: float, *, after_store: bool = False
) -> list[subprocess.CompletedProcess[str]]:
    """The checks of `ranks`; with `after_store`, the others start once node 0 has published its store, so that
    how long each takes to import torch on a loaded machine cannot decide which stage fails first."""
    procs = [check_process(tmp_path, nnodes, ranks[0], timeout)]
    deadline = time.monotonic() + 120
    while after_store and not (tmp_path / "store.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    procs += [check_process(tmp_path, nnodes, rank, timeout) for rank in ranks[1:]]
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=180), p.communicate()[0], "") for p in procs]


def test_three_nodes_on_loopback_pass_and_a_missing_one_is_found_within_the_bound(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    passed = run_checks(tmp_path / "ok", 3, [0, 1, 2], 60)
    assert [p.returncode for p in passed] == [0, 0, 0], [p.stdout[-500:] for p in passed]
    results = [safeio.read_json(tmp_path / "ok" / f"r{r}.json") for r in range(3)]
    assert all(r is not None and r["ok"] and r["peers_ok"] and r["reached"] for r in results), results
    # Node 2 never comes: nodes 0 and 1 reach the store, wait for it in the group, give up after their bound (20 s:
    # node 1's torch import must fit in it, on a loaded machine), and say so.
    (tmp_path / "missing").mkdir()
    failed = run_checks(tmp_path / "missing", 3, [0, 1], 20, after_store=True)
    assert [p.returncode for p in failed] == [1, 1], [p.stdout[-500:] for p in failed]
    found = [safeio.read_json(tmp_path / "missing" / f"r{r}.json") for r in range(2)]
    assert [(r or {}).get("stage") for r in found] == ["join", "join"], found
    assert [(r or {}).get("reached") for r in found] == [True, True]


def test_the_node_checks_last_lines_reach_the_event_bounded_and_typed() -> None:
    record = {**PASSED, "output": ["a", 7, "x" * 500, "b", "c", "d", "e", "f"]}
    assert nodecheck.checked(DIST, record, 0, 1.0).output == ("a", "x" * 200, "b", "c")
    assert nodecheck.checked(DIST, {**PASSED, "output": "not a list"}, 0, 1.0).output == ()


@pytest.mark.parametrize(
    ("command", "timeout", "why", "lines"),
    [
        ("echo fine", 10, "", ["fine"]),
        ("echo 'GPU 1: diag failed'; echo '  '; exit 3", 10, "node_check exited 3; last output: GPU 1: diag failed",
         ["GPU 1: diag failed"]),
        ("exit 1", 10, "node_check exited 1; no output", []),
        ("kill -9 $$", 10, "node_check was ended by signal 9; no output", []),
        ("echo testing; sleep 30", 1, "node_check outlived its 1 s bound and was killed; last output: testing",
         ["testing"]),
        ("seq 1 100000", 10, "", ["99996", "99997", "99998", "99999", "100000"]),
    ],
)  # fmt: skip
def test_the_sites_node_check_says_its_status_and_last_line(
    command: str, timeout: float, why: str, lines: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert checkprog.site_check(command, timeout)[:2] == (why, lines)
    logged = capsys.readouterr().out
    assert logged.startswith(f"ddpctl preflight: node check (bound {timeout:g} s): {command}"), logged[:300]
    assert len(logged) < checkprog.OUTPUT_KEEP + 1000  # the node's log gets the last 64 KiB, not all of it


def test_the_check_is_given_the_node_check_and_a_bound_that_allows_for_it(tmp_path: Path) -> None:
    from ddpctl.run.layout import RunLayout
    from ddpctl.spec import HealthSettings, JobSpec

    spec = JobSpec(name="x", script="t.py", health=HealthSettings(node_check="dcgmi diag -r 1", preflight_timeout_s=60))
    argv = nodecheck.check_argv("python3", spec, DIST, RunLayout(tmp_path))
    assert argv[-4:] == [
        f"--disk={tmp_path}",
        f"--disk={tmp_path / 'checkpoints'}",
        "--node-check=dcgmi diag -r 1",
        "--node-check-timeout=120",
    ]
    assert nodecheck.bound_s(spec) == nodecheck.START_ALLOWANCE_S + 60 + 2 * 120
    plain = JobSpec(name="x", script="t.py")
    assert not any(a.startswith("--node-check") for a in nodecheck.check_argv("p", plain, DIST, RunLayout(tmp_path)))
    assert nodecheck.bound_s(plain) == nodecheck.START_ALLOWANCE_S + 60


def test_the_site_check_comes_first_and_the_built_in_checks_still_say_theirs(tmp_path: Path) -> None:
    def local(command: str | None, disk: Path) -> dict[str, Any]:
        args = argparse.Namespace(node_check=command, node_check_timeout=10.0, disk=[disk], gpus=0)
        result: dict[str, Any] = {"ok": True, "stage": "", "why": ""}
        checkprog.local_checks(args, result)
        return result

    assert local("true", tmp_path) == {"ok": True, "stage": "", "why": "", "output": []}
    unwritable = Path("/proc/self/checkpoints")  # measured at /proc/self, where no file can be made
    found = local(None, unwritable)
    assert (found["ok"], found["stage"]) == (False, "hardware")
    assert found["why"].startswith("/proc/self/checkpoints (at /proc/self) is not writable: "), found
    both = local("echo broken; exit 2", unwritable)
    assert (both["stage"], both["why"], both["output"]) == (
        "site",
        "node_check exited 2; last output: broken",
        ["broken"],
    )
