"""`top --once --json` and back (what the live `top --cluster` draws): a frame's facts survive the round trip,
what is not a row or a summary is left out, every text from the cluster is made visible; which failed asks
are asked again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ddpctl.cli.top_remote import asked_again
from ddpctl.errors import RemoteError
from ddpctl.health.rates import Summary
from ddpctl.health.topjson import as_json, facts_of, row_of, state_of, summary_of
from ddpctl.health.view import RankRow
from ddpctl.run.state import JobState

ROW = RankRow(3, "n01", 50, 0.2, 9, 120.0, "step 50 loss 1.0", stall=True, straggler=False)
SUMMARY = Summary(50, 100, 4.5, 90.0, 11.1, 0.5)


def test_a_frames_facts_survive_the_json_round_trip() -> None:
    facts = {"attempt": 2, "rows": [ROW], "summary": SUMMARY, "notes": [("rank 3 hung", True)], "causes": ["why"]}
    data = json.loads(json.dumps(as_json("7", "train", JobState("RUNNING", restarts=2, exit_code=None), facts)))
    assert (data["job_id"], data["name"], state_of(data["state"])) == ("7", "train", JobState("RUNNING", restarts=2))
    assert facts_of(data) == facts


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"rank": 1}, RankRow(1, "", None, None, None, None, "", stall=False, straggler=False)),
        (
            {"rank": 2, "node": "n\x1b[2J", "line": "a\x1b]0;x\x07b", "step": "5", "lag": True, "stall": 1},
            RankRow(2, "n^[[2J", None, None, None, None, "a^[]0;x^Gb", stall=False, straggler=False),
        ),
        (
            {"rank": 4, "step_s": 1, "since_s": 2.5, "straggler": True},
            RankRow(4, "", None, 1.0, None, 2.5, "", False, True),
        ),
        ({"rank": "1"}, None),  # no integer rank: not a row
        ({"rank": True}, None),
        (["rank", 1], None),
        (None, None),
    ],
)
def test_a_row_from_the_cluster_is_checked_and_made_visible(data: object, expected: RankRow | None) -> None:
    assert row_of(data) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"step": 5, "total_steps": 10, "steps_per_s": 2, "stalled": True},
            Summary(5, 10, 2.0, None, None, None, True),
        ),
        ({"step": 5.5, "eta_s": "soon", "stalled": "yes"}, Summary(None, None, None, None, None, None, False)),
        ("not a summary", None),
        (None, None),
    ],
)
def test_a_summary_from_the_cluster_keeps_only_values_of_its_types(data: object, expected: Summary | None) -> None:
    assert summary_of(data) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"state": "COMPLETED", "exit_code": 0}, JobState("COMPLETED", exit_code=0)),
        ({"state": "RUN\x1b[2J", "restarts": "2"}, JobState("RUN^[[2J")),
        ({}, JobState("UNKNOWN")),
        ("RUNNING", JobState("UNKNOWN")),
    ],
)
def test_the_state_from_the_cluster(data: object, expected: JobState) -> None:
    assert state_of(data) == expected


@pytest.mark.parametrize(
    ("data", "notes", "causes", "rows"),
    [
        ({"notes": [["a", True], ["b", "yes"], ["c"], "d"], "causes": ["x", 3]}, [("a", True), ("b", False)], ["x"], 0),
        ({"notes": "none", "causes": None, "rows": "none"}, [], [], 0),
        ({"rows": [{"rank": 0}, {"rank": "x"}, {"rank": 1}]}, [], [], 2),
        (
            {"notes": [["1", False], ["2", False], ["3\x07", True]], "causes": ["old", "new\r"]},
            [("2", False), ("3^G", True)],
            ["new^M"],
            0,
        ),
    ],
)
def test_notes_and_causes_are_the_newest_made_visible(
    data: dict[str, Any], notes: list[tuple[str, bool]], causes: list[str], rows: int
) -> None:
    facts = facts_of(data)
    assert (facts["notes"], facts["causes"], len(facts["rows"])) == (notes, causes, rows)


@pytest.mark.parametrize(
    ("kind", "again"),
    [
        ("dropped", True),
        ("unreachable", True),
        ("timeout", True),
        ("other", True),
        ("auth", False),  # asking again logs in no better
        ("hostkey-changed", False),
        ("hostkey-unknown", False),
        ("", False),  # the cluster's ddpctl said no (no such job)
    ],
)
def test_a_failed_ask_is_asked_again_only_for_the_connections_failures(kind: str, again: bool) -> None:
    err = RemoteError("cluster 'c': failed")
    err.kind = kind
    assert asked_again(err) is again
