"""What ended an attempt and who failed first (issue 26 item 2): literal event tables -> cause, node, rank, why."""

from __future__ import annotations

from typing import Any

import pytest

from ddpctl.node.blame import Blame, Facts, blame, facts_of
from ddpctl.node.decide import Progress, RunOutcome, decide
from ddpctl.node.torchreport import last_error
from ddpctl.run.history import KINDS, Decided, Kind, RunHistory, parse_event
from ddpctl.spec import RequeuePolicy

GLOO_CLOSED = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:1"
)
LAUNCHED = [{"event": "launch", "attempt": 0, "node": n} for n in ("n1", "n2")]
LAUNCHED_RANKED = [
    {"event": "launch", "attempt": 0, "node": n, "dist": {"NODE_RANK": i}} for i, n in enumerate(["n1", "n2"])
]


def exits(n1: list[tuple[int, int, float]], n2: list[tuple[int, int, float]], code: int = 1) -> list[dict[str, Any]]:
    """Both nodes' node-exit events with the (rank, exitcode, t) torchrun reported failed."""
    return [
        {
            "event": "node-exit",
            "attempt": 0,
            "node": node,
            "torchrun_exit": code,
            "exit": code,
            "failed": [{"rank": r, "exitcode": c, "t": t} for r, c, t in failed],
        }
        for node, failed in (("n1", n1), ("n2", n2))
    ]


def rank_exit(
    rank: int, node: str, t: float, error: str, *, status: int = 1, collateral: bool = False
) -> dict[str, Any]:
    return {
        "event": "rank-exit",
        "attempt": 0,
        "rank": rank,
        "node": node,
        "t": t,
        "status": status,
        "error": error,
        "collateral": collateral,
    }


# A SIGKILL of rank 1 on n1: torchrun stopped rank 0 (SIGTERM); n2's ranks died of Gloo errors, and their
# records are even dated before torchrun noticed the kill on n1.
KILLED = [
    *LAUNCHED,
    rank_exit(2, "n2", 9.9, GLOO_CLOSED, collateral=True),
    rank_exit(3, "n2", 9.95, GLOO_CLOSED, collateral=True),
    *exits([(0, -15, 10.2), (1, -9, 10.1)], [(2, 1, 10.0), (3, 1, 10.0)]),
]
OOM = [*KILLED, {"event": "oom", "attempt": 0, "node": "n1", "kills": 1, "limit_bytes": 1 << 30}]
# Rank 3 raised; the collateral Gloo errors of ranks 0 and 1 were recorded first.
SCRIPT_ERROR = [
    *LAUNCHED,
    rank_exit(0, "n1", 10.4, GLOO_CLOSED, collateral=True),
    rank_exit(1, "n1", 10.5, "RuntimeError: Gloo connectFullMesh failed with Connection refused", collateral=True),
    rank_exit(3, "n2", 11.0, "ValueError: bad batch at step 12"),
    *exits([(0, 1, 10.5), (1, 1, 10.5)], [(2, -15, 11.1), (3, 1, 11.1)]),
]
HUNG = [
    *LAUNCHED,
    {
        "event": "hang",
        "attempt": 0,
        "idle_s": 121.0,
        "timeout_s": 120.0,
        "culprits": [{"rank": 2, "node": "n2", "step": 12, "where": "backward (train.py:40)"}],
    },
    *exits([(0, -15, 130.0)], [(2, -15, 130.0)]),
]
COLLATERAL_ONLY = [*LAUNCHED, rank_exit(0, "n1", 5.0, GLOO_CLOSED, collateral=True), exits([(0, 1, 5.1)], [])[0]]
# Issue 42: a stop nobody acknowledged, the attempt killed after the lead time (local backend; Slurm's grace time).
UNACKNOWLEDGED = [*LAUNCHED, {"event": "stop-unacknowledged", "attempt": 0, "waited_s": 3}]
LOST = "the work of the 4 s since the newest checkpoint file is lost"
STOP_KILLED = [*UNACKNOWLEDGED, {"event": "stop-killed", "attempt": 0, "waited_s": 4.0, "lost": LOST}]


@pytest.mark.parametrize(
    ("records", "code", "stopped", "expected"),
    [
        pytest.param(
            KILLED, 0, True, Blame("stop", why="the ranks agreed on a stop and saved its checkpoint"), id="stop"
        ),
        pytest.param([*LAUNCHED, *exits([], [], code=0)], 0, False, None, id="completed"),
        pytest.param(
            [
                *LAUNCHED,
                {
                    "event": "stop",
                    "attempt": 0,
                    "source": "script",
                    "checkpoint": "/c/x.ckpt",
                    "checkpoint_mtime": 90.0,
                    "signal_time": 100.0,
                },
            ],
            0,
            True,
            Blame(
                "stop",
                why="the script exited cleanly after the stop request without saving a checkpoint "
                "(its newest, /c/x.ckpt, is older)",
            ),
            id="script-stop-saved-nothing",
        ),
        pytest.param(
            [
                *LAUNCHED,
                {
                    "event": "stop",
                    "attempt": 0,
                    "source": "script",
                    "checkpoint": "/c/x.ckpt",
                    "checkpoint_mtime": 101.0,
                    "signal_time": 100.0,
                },
            ],
            0,
            True,
            Blame("stop", why="the script saved /c/x.ckpt after the stop request and exited cleanly"),
            id="script-stop-saved",
        ),
        pytest.param(
            STOP_KILLED,
            137,
            False,
            Blame(
                "stop-timeout",
                why=f"no rank acknowledged the stop within the lead time: the local backend killed the attempt; {LOST}",
            ),
            id="stop-killed-locally",
        ),
        pytest.param(
            [*UNACKNOWLEDGED, *exits([(0, -9, 5.0)], [(2, -9, 5.0)])],
            137,
            False,
            Blame(
                "stop-timeout",
                why="no rank acknowledged the stop within the lead time: the ranks were killed "
                "at the end of the grace time",
            ),
            id="stop-killed-by-slurm",
        ),
        pytest.param(
            [*UNACKNOWLEDGED, rank_exit(1, "n1", 4.0, "ValueError: bad"), *exits([(1, 1, 4.1)], [])],
            1,
            False,
            Blame("script-error", "n1", 1, "ValueError: bad"),
            id="error-after-unacknowledged-stop",
        ),
        pytest.param(KILLED, 1, False, Blame("rank-crash", "n1", 1, "killed by SIGKILL"), id="sigkill-not-gloo"),
        pytest.param(
            [*LAUNCHED, *exits([(1, -11, 3.0), (0, -15, 3.1)], [(2, 1, 2.5)])],
            1,
            False,
            Blame("rank-crash", "n1", 1, "killed by SIGSEGV"),
            id="sigsegv",
        ),
        pytest.param(OOM, 1, False, Blame("oom", "n1", 1, "killed by SIGKILL by the kernel's OOM killer"), id="oom"),
        pytest.param(
            SCRIPT_ERROR, 1, False, Blame("script-error", "n2", 3, "ValueError: bad batch at step 12"), id="exception"
        ),
        pytest.param(
            [*LAUNCHED, rank_exit(1, "n1", 4.0, "", status=2), *exits([(1, 2, 4.1)], [])],
            2,
            False,
            Blame("script-error", "n1", 1, "exited with status 2"),
            id="sys-exit",
        ),
        pytest.param(
            [*LAUNCHED, *exits([], [(3, 7, 4.0)])],
            7,
            False,
            Blame("script-error", "n2", 3, "exited with status 7, as its launcher reported"),
            id="reported-exit-only",
        ),
        pytest.param(
            HUNG,
            1,
            False,
            Blame(
                "hang",
                "n2",
                2,
                "no progress for 121.0 s; stopped first at step 12: backward (train.py:40)",
                at="backward (train.py:40)",
            ),
            id="hang",
        ),
        pytest.param(
            COLLATERAL_ONLY,
            1,
            False,
            Blame("node-lost", "n2", None, f"its launcher recorded no exit; rank 0 saw: {GLOO_CLOSED}"),
            id="vanished-node",
        ),
        pytest.param(
            [*COLLATERAL_ONLY, exits([], [])[1]],
            1,
            False,
            Blame("rank-crash", None, None, f"a peer died without a record; rank 0 saw: {GLOO_CLOSED}"),
            id="collateral-only",
        ),
        pytest.param([], 1, False, Blame("script-error", why="the step exited 1; no rank recorded why"), id="nothing"),
        pytest.param(  # a lost node that never wrote a heartbeat, but launched as node rank 1: its host
            [*LAUNCHED_RANKED, {"event": "node-lost", "attempt": 0, "node_rank": 1, "why": "no heartbeat"}],
            1,
            False,
            Blame("node-lost", "n2", None, "no heartbeat"),
            id="lost-rank-launched",
        ),
        pytest.param(  # ... and one that never launched: no host to exclude (never the words as a host name)
            [*LAUNCHED, {"event": "node-lost", "attempt": 0, "node_rank": 1, "why": "no heartbeat"}],
            1,
            False,
            Blame("node-lost", None, None, "node rank 1: no heartbeat"),
            id="lost-rank-unknown",
        ),
    ],
)
def test_blame_table(records: list[dict[str, Any]], code: int, stopped: bool, expected: Blame | None) -> None:
    attempt = RunHistory.from_records(records).attempt(0)
    assert blame(facts_of(attempt, code, stopped)) == expected


def test_untrusted_failed_entries_tell_nothing() -> None:
    records = [*LAUNCHED, *exits([], [])]
    records[-1]["failed"] = [{"rank": True, "exitcode": "-9"}, {"rank": 3, "exitcode": True}, {"exitcode": -9}]
    found = blame(facts_of(RunHistory.from_records(records).attempt(0), 1, False))
    assert found == Blame("rank-crash", "n2", None, "killed by SIGKILL")


NONE_USED: dict[Kind, int] = dict.fromkeys(KINDS, 0)


@pytest.mark.parametrize(
    ("cause", "kind", "action"),
    [
        # With default budgets a killed rank, a lost node and a hang cost a requeue (max_node_failures: 5) ...
        ("rank-crash", "node_failure", "requeue"),
        ("node-lost", "node_failure", "requeue"),
        ("hang", "node_failure", "requeue"),
        # ... while the script's own error and its memory use still fail fast (max_failures: 0).
        ("script-error", "failure", "finish"),
        ("oom", "failure", "finish"),
    ],
)
def test_causes_charge_their_budgets(cause: str, kind: str, action: str) -> None:
    outcome = RunOutcome(1, False, None, blame=Blame(cause, "n1", 1, "why"))  # type: ignore[arg-type]
    decision = decide(outcome, RequeuePolicy(), NONE_USED)
    assert (decision.kind, decision.action) == (kind, action)


def test_the_decision_event_names_the_cause_and_old_readers_read_it() -> None:
    outcome = RunOutcome(137, False, None, blame=Blame("rank-crash", "n1", 1, "killed by SIGKILL"))
    event = decide(outcome, RequeuePolicy(), NONE_USED).as_event(0, 137, False)
    record = event.as_json()
    assert (record["cause"], record["cause_node"], record["cause_rank"], record["cause_why"]) == (
        "rank-crash",
        "n1",
        1,
        "killed by SIGKILL",
    )
    assert record["reason"] == "node_failure (rank-crash): requeue 1 of 5"
    assert parse_event(record) == event
    # A decision without a cause (an older ddpctl's) still reads; an unknown cause reads as none.
    assert parse_event({"event": "decision", "attempt": 0, "action": "finish", "cause": "gremlins"}) == Decided(
        attempt=0, action="finish"
    )
    assert "cause" not in decide(RunOutcome(0, False, None), RequeuePolicy(), NONE_USED).as_event(0, 0, False).as_json()


def test_a_rank_killed_after_the_preemption_signal_is_charged_to_the_signal() -> None:
    outcome = RunOutcome(137, False, "preemption", blame=Blame("rank-crash", "n1", 1, "killed by SIGKILL"))
    assert decide(outcome, RequeuePolicy(), NONE_USED).kind == "preemption"


# --- issue 26 item 6: attempts that save nothing newer than what they resumed from ------------------------------
CRASH = Blame("script-error", "n1", 1, "RuntimeError: injected crash at step 3")


@pytest.mark.parametrize(
    ("progress", "blamed", "stalled", "action"),
    [
        # Resumed from scratch and saved step 2: progress, whatever ended it.
        (Progress(None, 2), CRASH, 0, "requeue"),
        # Resumed from 2, ended with 2 still the newest: the first stalled attempt, then the second.
        (Progress(2, 2), CRASH, 1, "requeue"),
        (Progress(2, 2, stalled_before=1), CRASH, 2, "requeue"),
        # The third in a row ends the run, budgets left or not.
        (Progress(2, 2, stalled_before=2), CRASH, 3, "finish"),
        # From scratch and nothing saved: stalled as well (the same crash before the first checkpoint).
        (Progress(None, None, stalled_before=2), CRASH, 3, "finish"),
        # A newer checkpoint breaks the series.
        (Progress(2, 4, stalled_before=2), CRASH, 0, "requeue"),
        # Infrastructure failures count too (the same segfault at the same step).
        (Progress(2, 2, stalled_before=2), Blame("rank-crash", "n1", 1, "killed by SIGSEGV"), 3, "finish"),
        # Unknown progress (no ddpctl.runtime resume recorded): never claimed stalled.
        (None, CRASH, 0, "requeue"),
    ],
)
def test_stalled_attempts_end_the_run(progress: Progress | None, blamed: Blame, stalled: int, action: str) -> None:
    outcome = RunOutcome(1, False, None, blame=blamed, progress=progress)
    decision = decide(outcome, RequeuePolicy(max_failures=10), NONE_USED)
    assert (decision.stalled, decision.action) == (stalled, action)
    if action == "finish":
        assert decision.exit_code == 1
        assert "3 attempts in a row ended without a complete checkpoint newer than the one they resumed from" in (
            decision.reason
        )
        assert decision.reason.endswith("requeue.max_stalled_attempts=3: the same failure again, not retried")
        assert decision.as_event(3, 1, False).as_json()["stalled"] == 3


def test_stops_and_signals_never_count_as_stalled_and_zero_is_off() -> None:
    same = Progress(2, 2, stalled_before=5)
    assert decide(RunOutcome(0, True, "preemption", progress=same), RequeuePolicy(), NONE_USED).stalled == 0
    assert decide(RunOutcome(137, False, "timeout", progress=same), RequeuePolicy(), NONE_USED).stalled == 0
    off = decide(
        RunOutcome(1, False, None, blame=CRASH, progress=same),
        RequeuePolicy(max_failures=9, max_stalled_attempts=0),
        NONE_USED,
    )
    assert (off.action, off.stalled) == ("requeue", 6)


@pytest.mark.parametrize(
    ("output", "found"),
    [
        ("", ""),
        ("ddpctl local: attempt 0 started\n", ""),
        (
            "ddpctl: error: /nonexistent/python3: No such file or directory\nddpctl local: attempt 0 ended (2)\n",
            "ddpctl: error: /nonexistent/python3: No such file or directory",
        ),
        (
            "Traceback (most recent call last):\n  File \"x\", line 1\nImportError: cannot import name 'v'\n",
            "ImportError: cannot import name 'v'",
        ),
        ("ValueError: first\nsome line\nOSError: second\n", "OSError: second"),  # the last one
        ("an error occurred somewhere\n", ""),  # prose is not an error line
    ],
)
def test_last_error_of_the_batch_output(output: str, found: str) -> None:
    assert last_error(output) == found


def test_a_launchers_own_error_is_the_reason_where_no_rank_recorded_one() -> None:
    said = blame(Facts(exit_code=2, launcher_error="ddpctl: error: /x/python: No such file or directory"))
    assert said == Blame(
        "script-error", why="the step exited 2; its launcher said: ddpctl: error: /x/python: No such file or directory"
    )
    assert blame(Facts(exit_code=2)) == Blame("script-error", why="the step exited 2; no rank recorded why")
