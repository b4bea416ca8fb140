"""The hang's collective from the ranks' flight-recorder dumps (ddpctl.health.collectives): literal tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddpctl.health.collectives import summarise
from ddpctl.health.report import describe_hang
from ddpctl.node.blame import hang_blame
from ddpctl.run import history
from ddpctl.run.history import Hung


def entry(seq: int, op: str = "all_reduce", done: bool = True, sizes: Any = None, group: str = "0") -> dict[str, Any]:
    """One entry as torch's `_dump_fr_trace_json` writes it (Gloo: state stays "scheduled", `retired` on completion)."""
    return {
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "is_p2p": False,
        "profiling_name": f"gloo:{op}",
        "state": "scheduled",
        "retired": done,
        "process_group": [group, "default_pg"],
        "input_sizes": sizes if sizes is not None else [[3]],
    }


def dump(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"entries": list(entries)}


# rank -> (its entries as (seq, done)), expected line
CASES = [
    (
        {0: [(56, True), (57, False)], 1: [(56, True), (57, False)], 2: [(56, True), (57, False)], 3: [(56, True)]},
        "rank 3 never entered all_reduce #57 (the others wait in it)",
    ),
    (
        {0: [(57, False)], 1: [(56, True)], 2: [(55, True)]},
        "ranks 1, 2 never entered all_reduce #57 (the others wait in it)",
    ),
    (
        {0: [(57, False)], 1: [(57, False)]},
        "ranks 0, 1 wait in all_reduce #57 that every rank entered (none completed it)",
    ),
    ({0: [(57, True)], 1: [(57, True)]}, "no rank waits in a collective"),
    ({0: [(57, False)], 1: []}, "rank 1 never entered all_reduce #57 (the others wait in it)"),
]


@pytest.mark.parametrize(("table", "line"), CASES)
def test_the_rank_that_never_entered_is_named(table: dict[int, list[tuple[int, bool]]], line: str) -> None:
    found = summarise({r: dump(*(entry(s, done=d) for s, d in rows)) for r, rows in table.items()})
    assert found.line == line


def test_each_ranks_last_entered_and_completed_collective_with_sizes() -> None:
    found = summarise(
        {
            0: dump(entry(4, "broadcast", sizes=[[10]]), entry(5, done=False, sizes=[[3], [2, 2]])),
            1: dump(entry(4, "broadcast", sizes=[[10]])),
        }
    )
    assert found.missing == (1,) and found.waited is not None and found.waited.seq == 5
    assert found.ranks == {
        "0": {
            "entered": {"group": "0", "seq": 5, "op": "all_reduce", "sizes": "[3], [2, 2]"},
            "completed": {"group": "0", "seq": 4, "op": "broadcast", "sizes": "[10]"},
        },
        "1": {
            "entered": {"group": "0", "seq": 4, "op": "broadcast", "sizes": "[10]"},
            "completed": {"group": "0", "seq": 4, "op": "broadcast", "sizes": "[10]"},
        },
    }


def test_ranks_without_a_dump_are_said_and_other_groups_named() -> None:
    found = summarise(
        {
            0: dump(entry(9, group="0"), entry(3, done=False, group="1")),
            1: dump(entry(9, group="0"), entry(2, group="1")),
            2: None,
            3: {"error": "torch.distributed not imported"},
        }
    )
    assert found.line == (
        "rank 1 never entered all_reduce #3 (group 1) (the others wait in it); no flight-recorder dump from ranks 2, 3"
    )
    skipped = summarise(
        {
            0: dump(entry(40, sizes=[[3]], done=False), entry(1, "barrier", group="1")),
            1: dump(entry(39), entry(2, "barrier", group="1", sizes=[[0]], done=False)),
        }
    )
    assert skipped.line == (
        "rank 1 never entered all_reduce #40 (the others wait in it); rank 1 waits in barrier #2 (group 1)"
    )
    assert summarise({0: None}).line == "no flight-recorder dump from rank 0"
    assert summarise({}).line == ""


def test_point_to_point_and_malformed_entries_are_left_out() -> None:
    junk: list[Any] = [
        {**entry(80, done=False), "is_p2p": True},
        {"collective_seq_id": "57"},
        {"collective_seq_id": True},
        "not an entry",
    ]
    found = summarise({0: {"entries": [entry(7, done=False), *junk]}, 1: {"entries": [entry(6), *junk]}})
    assert found.line == "rank 1 never entered all_reduce #7 (the others wait in it)"
    assert summarise({0: {"entries": "nope"}}).line == "no rank waits in a collective"


def test_the_line_leads_the_hang_text_and_survives_the_event_log(tmp_path: Path) -> None:
    line = "rank 3 never entered all_reduce #17 (the others wait in it)"
    culprit = {"rank": 3, "node": "n2", "step": 3, "where": "train.py:9 in skip"}
    per_rank = {"3": {"entered": {"group": "0", "seq": 16, "op": "all_reduce", "sizes": "[29]"}, "completed": None}}
    history.append(
        tmp_path / "events.jsonl",
        Hung(attempt=0, idle_s=12.0, timeout_s=10.0, culprits=(culprit,), collective=line, collectives=per_rank),
    )
    event = history.load(tmp_path / "events.jsonl").attempt(0).first(Hung)
    assert event is not None and (event.collective, event.collectives) == (line, per_rank)
    assert describe_hang(event).startswith(f"hang in attempt 0: {line}; no progress for 12.0 s (allowed 10.0 s)")
    assert hang_blame(event).why.startswith(f"{line}; no progress for 12.0 s; stopped first at step 3")
