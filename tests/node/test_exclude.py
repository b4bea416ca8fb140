"""Never go back to a bad node: whom a failed attempt blames, when that node is excluded, and the bound (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from ddpctl.node.exclude import (
    MAX_EXCLUDED_UNKNOWN,
    Room,
    blame,
    candidate,
    describe,
    excluded_list,
    exclusion,
    given_excluded,
)
from ddpctl.run.history import RunHistory
from ddpctl.slurm.env import job_hosts


def failed(
    attempt: int, *exits: tuple[str, int], kind: str | None = "failure", action: str = "requeue"
) -> list[dict[str, Any]]:
    """An attempt whose nodes exited in this order, then its decision."""
    records: list[dict[str, Any]] = [{"event": "node-exit", "node": n, "attempt": attempt, "exit": c} for n, c in exits]
    return [*records, {"event": "decision", "attempt": attempt, "action": action, "kind": kind}]


def hung(attempt: int, *culprit_nodes: str) -> list[dict[str, Any]]:
    culprits = [{"rank": i, "node": n, "step": 5} for i, n in enumerate(culprit_nodes)]
    return [{"event": "hang", "attempt": attempt, "culprits": culprits}, *failed(attempt, kind="node_failure")]


def caused(records: list[dict[str, Any]], cause: str, node: str | None) -> list[dict[str, Any]]:
    """The same attempt with its decision naming a cause and first-failed node, as ddpctl.node.blame does."""
    return [{**r, "cause": cause, "cause_node": node} if r["event"] == "decision" else r for r in records]


BLAME_CASES = [
    # (records of attempt 0, the blame: (node, cause) or None)
    (failed(0, ("n9", 1), ("n2", 1)), ("n9", "script-error")),  # the first node that failed on its own
    (failed(0, ("n2", 143), ("n9", 1)), ("n9", "script-error")),  # srun's kill (>= 128) of n2 is no own failure
    (failed(0, ("n2", 143)), None),  # nobody failed on its own
    (failed(0, ("n1", 0), ("n2", 0), kind="preemption"), None),  # a stop blames nobody
    (failed(0, ("n9", 1), action="finish", kind=None), None),  # completed (no kind): nobody
    ([{"event": "node-exit", "node": "n9", "attempt": 0, "exit": 1}], None),  # not decided yet
    (hung(0, "n4", "n4"), ("n4", "hang")),  # every culprit on one node
    (hung(0, "n4", "n5"), None),  # a hang spread over nodes blames none
    (hung(0, "?"), None),
    ([{"event": "oom", "node": "n3", "attempt": 0, "kills": 1}, *failed(0, ("n3", 1))], ("n3", "oom")),
    ([{"event": "oom", "node": "n3", "attempt": 0, "kills": 1}, *failed(0, ("n4", 1))], ("n4", "script-error")),
    # The decision's own cause and first-failed node (ddpctl.node.blame) win over the node-exit order.
    (caused(failed(0, ("n2", 1), ("n9", 1)), "script-error", "n9"), ("n9", "script-error")),
    (caused(failed(0, ("n2", 1), kind="node_failure"), "rank-crash", "n3"), ("n3", "rank-crash")),
    (caused(failed(0, kind="node_failure"), "node-lost", "n7"), ("n7", "node-lost")),
    (caused(failed(0, ("n9", 1)), "script-error", None), None),  # it could not name a node: none
    (caused(hung(0, "n4", "n5"), "hang", "n4"), None),  # a hang is the culprits' (spread: none)
    (caused(hung(0, "n4"), "hang", "n4"), ("n4", "hang")),
]


@pytest.mark.parametrize(("records", "expected"), BLAME_CASES)
def test_the_blamed_node(records: list[dict[str, Any]], expected: tuple[str, str] | None) -> None:
    found = blame(RunHistory.from_records(records).attempt(0))
    assert (None if found is None else (found.node, found.cause)) == expected


CANDIDATE_CASES = [
    # (the run's records, the attempt just decided, user's exclude, expected (node, cause, times) or None)
    (failed(0, ("n9", 1)), 0, set(), None),  # a script's failure once: not yet
    (failed(0, ("n9", 1)) + failed(1, ("n9", 1)), 1, set(), ("n9", "script-error", 2)),  # twice on the same node
    (failed(0, ("n9", 1)) + failed(1, ("n3", 1)), 1, set(), None),  # fails everywhere: a bug, no node
    (failed(0, ("n9", 1)) + failed(1, ("n9", 1)), 1, {"n9"}, None),  # the user excluded it already
    (hung(0, "n4"), 0, set(), ("n4", "hang", 1)),  # infrastructure: at once
    (hung(0, "n4") + failed(1, ("n4", 1)), 1, set(), None),  # same node, another cause: once each
    (
        failed(0, ("n9", 1))
        + failed(1, ("n9", 1))
        + [{"event": "node-excluded", "attempt": 1, "node": "n9", "cause": "script-error"}]
        + failed(2, ("n9", 1)),
        2,
        set(),
        None,  # already excluded (Slurm ran it there anyway: nothing more to do)
    ),
    (
        failed(0, ("n9", 1))
        + failed(1, ("n9", 1))
        + [{"event": "node-excluded", "attempt": 1, "node": "n9", "cause": "script-error", "applied": False}]
        + failed(2, ("n9", 1)),
        2,
        set(),
        ("n9", "script-error", 3),  # kept in by the bound before: asked again
    ),
]


@pytest.mark.parametrize(("records", "attempt", "given", "expected"), CANDIDATE_CASES)
def test_when_a_node_is_excluded(
    records: list[dict[str, Any]], attempt: int, given: set[str], expected: tuple[str, str, int] | None
) -> None:
    found = candidate(RunHistory.from_records(records), attempt, frozenset(given))
    assert (None if found is None else (found.blame.node, found.blame.cause, found.times)) == expected


TWICE = failed(0, ("n9", 1)) + failed(1, ("n9", 1))
EXCLUDED_N1 = [{"event": "node-excluded", "attempt": 0, "node": "n1", "cause": "hang"}]
BOUND_CASES = [
    # (earlier records, room, nodes needed, applied, why ends with)
    ([], Room("scale", 16), 2, True, "script-error on n9 in 2 attempts"),
    (
        [],
        Room("debug", 2),
        2,
        False,
        "not excluded: partition debug has 2 nodes, the job needs 2 and 0 are excluded already",
    ),
    ([], Room("p", 3), 2, True, "in 2 attempts"),  # 3 - 1 = 2 still fit
    (EXCLUDED_N1, Room("p", 3), 2, False, "the job needs 2 and 1 are excluded already"),
    ([], Room("p", 3, given=frozenset({"n1"})), 2, False, "1 are excluded already"),  # the user's own count
    # Excluded nodes outside the partition do not use it up.
    (EXCLUDED_N1, Room("p", 3, hosts=frozenset({"n7", "n8", "n9"})), 2, True, "in 2 attempts"),
    ([], Room(), 2, True, "in 2 attempts"),  # size unknown: the cap
    (
        [
            {"event": "node-excluded", "attempt": 0, "node": f"x{i}", "cause": "hang"}
            for i in range(MAX_EXCLUDED_UNKNOWN)
        ],
        Room(),
        2,
        False,
        f"not excluded: at most {MAX_EXCLUDED_UNKNOWN} nodes where the partition's size is unknown",
    ),
]


@pytest.mark.parametrize(("earlier", "room", "needed", "applied", "why"), BOUND_CASES)
def test_the_bound_keeps_the_job_in_its_partition(
    earlier: list[dict[str, Any]], room: Room, needed: int, applied: bool, why: str
) -> None:
    past = RunHistory.from_records(earlier + TWICE)
    wanted = candidate(past, 1, room.given)
    assert wanted is not None
    event = exclusion(past, wanted, needed, room)
    assert (event.node, event.cause, event.attempt, event.applied) == ("n9", "script-error", 1, applied)
    assert event.why.endswith(why), event.why


def test_the_list_merges_the_users_own_and_status_says_both_kinds() -> None:
    past = RunHistory.from_records(
        [
            {"event": "node-excluded", "attempt": 0, "node": "n4", "cause": "hang", "why": "hang on n4"},
            {"event": "node-excluded", "attempt": 2, "node": "n1", "cause": "oom", "applied": False, "why": "w"},
            {"event": "node-excluded", "attempt": 3, "node": "n9", "cause": "script-error", "why": "twice"},
        ]
    )
    assert past.excluded_nodes() == {"n4", "n9"}
    assert excluded_list(past, frozenset({"z1", "n4"})) == ["n4", "z1", "n9"]
    assert describe(past) == [
        "excluded nodes: n4 (hang on n4, after attempt 0), n9 (twice, after attempt 3)",
        "node n1 kept after attempt 2: w",
    ]
    assert describe(RunHistory()) == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((("exclude", "n[1-2],n5"),), {"n1", "n2", "n5"}),
        ((("exclud", "n3"),), {"n3"}),
        ((("exclusive", True), ("exclu", "n3")), set()),  # `exclu` is ambiguous with --exclusive for sbatch
        ((("exclude", "n[1-"),), {"n[1-"}),  # not a hostlist: taken as written
        ((), set()),
    ],
)
def test_the_users_own_exclude(options: tuple[tuple[str, str | bool | int], ...], expected: set[str]) -> None:
    assert given_excluded(options) == expected


NINE = ",".join(f"n{i}" for i in range(1, 10))  # a "node" a run-dir file named: nine nodes of ten in ExcNodeList


@pytest.mark.parametrize(
    ("node", "room", "applied", "why"),
    [
        (NINE, Room("p", 10, hosts=frozenset(NINE.split(",")) | {"n10"}), False, f"{NINE!r} is not a node name"),
        ("n[1-9]", Room("p", 10), False, "'n[1-9]' is not a node name"),
        ("n1 n2", Room(), False, "'n1 n2' is not a node name"),
        ("-n1", Room(), False, "'-n1' is not a node name"),
        ("n" * 65, Room(), False, "is not a node name"),
        ("n7", Room(nodes=frozenset({"n1", "n2"})), False, "n7 is not one of the job's nodes"),
        ("n2", Room(nodes=frozenset({"n1", "n2"})), True, "rank-crash on n2"),
        ("gpu-01.rack_2", Room(), True, "rank-crash on gpu-01.rack_2"),  # unknown job nodes: the name rule only
    ],
)
def test_only_a_node_name_of_the_job_is_excluded(node: str, room: Room, applied: bool, why: str) -> None:
    past = RunHistory.from_records(caused(failed(0, kind="node_failure"), "rank-crash", node))
    wanted = candidate(past, 0)
    assert wanted is not None
    event = exclusion(past, wanted, 1, room)
    assert event.applied is applied and why in event.why, event.why


def test_a_forged_exclusion_never_reaches_the_list() -> None:
    past = RunHistory.from_records(
        [
            {"event": "node-excluded", "attempt": 0, "node": NINE, "cause": "hang", "why": "forged"},
            {"event": "node-excluded", "attempt": 1, "node": "n4", "cause": "hang", "why": "hang on n4"},
        ]
    )
    assert excluded_list(past, frozenset({"z1"})) == ["z1", "n4"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_JOB_NODELIST": "n[1-3]"}, {"n1", "n2", "n3"}),
        ({"SLURM_NODELIST": "a1,b2"}, {"a1", "b2"}),
        ({"SLURM_JOB_NODELIST": "n1", "SLURM_JOB_NODELIST_HET_GROUP_1": "g[1-2]"}, {"n1", "g1", "g2"}),
        ({"SLURM_JOB_NODELIST": "n[1-"}, None),
        ({}, None),
    ],
)
def test_the_jobs_own_hosts(env: dict[str, str], expected: set[str] | None) -> None:
    assert job_hosts(env) == (None if expected is None else frozenset(expected))


def crashed(attempt: int, node: str, exitcode: int) -> list[dict[str, Any]]:
    """Rank 3 on `node` killed by signal -exitcode, as torchrun reported it, and the decision blaming it."""
    failed = [{"rank": 3, "exitcode": exitcode, "t": 1.0}]
    exit_event = {"event": "node-exit", "node": node, "attempt": attempt, "exit": 1, "failed": failed}
    decision = {"event": "decision", "attempt": attempt, "action": "requeue", "kind": "node_failure"}
    return [exit_event, decision | {"cause": "rank-crash", "cause_node": node, "cause_rank": 3}]


@pytest.mark.parametrize(
    ("records", "attempt", "expected"),
    [
        # A segfault or an abort its own code raised: the node's only once it repeats there (a C bug crashed
        # every attempt, and each first crash excluded a healthy node).
        (crashed(0, "n3", -11), 0, None),
        (crashed(0, "n3", -6), 0, None),
        (crashed(0, "n3", -11) + crashed(1, "n3", -11), 1, ("n3", "rank-crash", 2)),
        (crashed(0, "n3", -11) + crashed(1, "n4", -11), 1, None),
        # Killed from outside (not by the OOM killer): the node's at once, as before.
        (crashed(0, "n3", -9), 0, ("n3", "rank-crash", 1)),
        (crashed(0, "n3", -7), 0, None),  # SIGBUS
    ],
)
def test_a_rank_crashed_by_its_own_signal_excludes_its_node_only_when_it_repeats(
    records: list[dict[str, Any]], attempt: int, expected: tuple[str, str, int] | None
) -> None:
    found = candidate(RunHistory.from_records(records), attempt)
    assert (None if found is None else (found.blame.node, found.blame.cause, found.times)) == expected
