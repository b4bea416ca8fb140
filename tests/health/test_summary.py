"""Node summaries (ddpctl.health.summary): what a summary carries gives the verdicts the whole records give, and
a node reads only its own ranks' records and the other nodes' summaries (counted through the injected reader)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpctl import safeio
from ddpctl.health.hang import check_hang
from ddpctl.health.straggler import find_stragglers
from ddpctl.health.summary import STALE_S, JobView, Seat, digest, merge, summary, summary_ranks
from ddpctl.run.layout import RunLayout
from ddpctl.spec import HealthSettings

NOW = 10_000.0
EVAL = {"name": "eval", "allowance_s": 100.0, "extra": "x" * 100}


def rec(step: int | None, t: float, node: str = "n1", **extra: Any) -> dict[str, Any]:
    return {"step": step, "t": t, "started": 9_000.0, "written": t, "phase": "train", "node": node, **extra}


def through_summaries(records: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each rank's record as another node sees it: serialized in its node's summary and read back."""
    by_node: dict[str, dict[int, dict[str, Any]]] = {}
    for rank, record in records.items():
        by_node.setdefault(str(record["node"]), {})[rank] = record
    covered = [summary_ranks(json.loads(json.dumps(summary(n, 0, 1, own)))) or {} for n, own in by_node.items()]
    return merge({}, covered, {})


@pytest.mark.parametrize(
    ("policy", "records", "why"),
    [
        (HealthSettings(hang_timeout_s=20), {0: rec(5, NOW - 30), 1: rec(5, NOW - 31, "n2")}, "hang_timeout_s"),
        (HealthSettings(hang_timeout_s=20), {0: rec(5, NOW - 30), 1: rec(6, NOW - 5, "n2")}, None),
        (HealthSettings(), {0: rec(5, NOW - 310, step_s=1.0), 1: rec(5, NOW - 310, "n2", step_s=0.5)}, "derived"),
        (HealthSettings(), {0: rec(5, NOW - 350, step_s=40.0), 1: rec(5, NOW - 350, "n2")}, None),
        # the pause declared on one node's rank gives every node its allowance
        (
            HealthSettings(hang_floor_s=6),
            {0: rec(5, NOW - 10, phase="eval", pause=EVAL), 1: rec(5, NOW - 10, "n2", step_s=0.1)},
            None,
        ),
        (
            HealthSettings(hang_floor_s=6),
            {0: rec(5, NOW - 110, phase="eval", pause=EVAL), 1: rec(5, NOW - 110, "n2", step_s=0.1)},
            "declared pause (eval)",
        ),
        (
            HealthSettings(hang_floor_s=6, checkpoint_s=100),
            {0: rec(5, NOW - 50, phase="checkpoint"), 1: rec(5, NOW - 50, "n2")},
            None,
        ),
        (HealthSettings(hang_timeout_s=5), {0: rec(5, NOW - 50, phase="done"), 1: rec(5, NOW - 50, "n2")}, None),
        (
            HealthSettings(startup_s=30),
            {0: rec(None, NOW - 40, started=NOW - 40), 1: rec(None, 0, "n2", started=NOW - 10)},
            None,
        ),
        (
            HealthSettings(startup_s=30),
            {0: rec(None, NOW - 40, started=NOW - 40), 1: rec(None, 0, "n2", started=NOW - 35)},
            "startup_s",
        ),
        (HealthSettings(hang_timeout_s=20), {0: rec(5, NOW - 30, resumed=NOW - 2), 1: rec(5, NOW - 30, "n2")}, None),
    ],
)
def test_the_hang_verdict_from_summaries_is_the_one_from_the_records(
    policy: HealthSettings, records: dict[int, dict[str, Any]], why: str | None
) -> None:
    whole = check_hang(NOW, 9_000.0, records, policy)
    summed = check_hang(NOW, 9_000.0, through_summaries(records), policy)
    assert summed == whole
    assert (summed is None) if why is None else (summed is not None and why in summed.why)


def test_stragglers_and_silence_fields_survive_the_summary() -> None:
    records = {r: rec(9, NOW - 1, f"n{r // 2}", busy_s=0.5 if r == 3 else 0.1, window=20, step_s=0.6) for r in range(6)}
    assert [s.rank for s in find_stragglers(through_summaries(records), 2.0, 10)] == [3]
    assert find_stragglers(through_summaries(records), 2.0, 10) == find_stragglers(records, 2.0, 10)
    assert digest({**records[0], "history": [1.0] * 1000, "samples": 5})["written"] == NOW - 1
    assert "history" not in digest({**records[0], "history": [1.0] * 1000})


@pytest.mark.parametrize(
    ("found", "usable"),
    [
        ({"seq": 1, "ranks": {"3": {"step": 2}}}, {3: {"step": 2}}),
        ({"seq": 1, "ranks": {"3": {"step": "2"}}}, {}),  # an invalid digest is skipped like an invalid record
        ({"seq": 1, "ranks": {"-3": {"step": 2}, "x": {}}}, {}),
        ({"seq": "1", "ranks": {}}, None),
        ({"ranks": {}}, None),
        ([1], None),
    ],
)
def test_summaries_as_read_are_validated(found: Any, usable: dict[int, Any] | None) -> None:
    assert summary_ranks(found) == usable


class Counting:
    """The reader seam: counts which files a view opens."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, path: Path) -> dict[str, Any] | None:
        self.opened.append(path.name)
        return safeio.read_json(path)


def job(tmp_path: Path, nodes: int, ranks: int, t: float) -> RunLayout:
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir(parents=True)
    for r in range(nodes * ranks):
        safeio.write_json_atomic(layout.progress_file(0, r), rec(7, t, f"n{r // ranks}", written=t))
    return layout


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_node_reads_only_its_own_ranks_and_one_summary_per_node(tmp_path: Path) -> None:
    layout = job(tmp_path, nodes=4, ranks=3, t=NOW)
    readers = [Counting() for _ in range(4)]
    clock = Clock()
    views = [JobView(Seat(layout, 0, f"n{n}", n, 4), read=readers[n], clock=clock) for n in range(4)]
    for view in views:  # start-up: no summaries yet, so each node reads what none covers
        view.records()
    readers[2].opened.clear()
    clock.now += 1
    seen = views[2].records()
    assert sorted(readers[2].opened) == sorted(
        ["progress-6.json", "progress-7.json", "progress-8.json"] + [f"summary-node-{n}.json" for n in (0, 1, 3)]
    )
    assert sorted(seen) == list(range(12)) and seen[0]["node"] == "n0" and seen[7]["step"] == 7


def test_a_stale_or_missing_summary_falls_back_to_that_nodes_records(tmp_path: Path) -> None:
    layout = job(tmp_path, nodes=3, ranks=2, t=NOW)
    clock = Clock()
    views = [JobView(Seat(layout, 0, f"n{n}", n, 3), clock=clock) for n in range(3)]
    for view in views:
        view.records()
    reader = Counting()
    one = JobView(Seat(layout, 0, "n1", 1, 3), read=reader, clock=clock)
    one.records()
    clock.now += STALE_S + 1
    views[0].records()  # node 0's watchdog still polls; node 2's stopped (its summary no longer changes)
    layout.node_summary(0, 0).unlink()  # and node 0's summary is gone
    safeio.write_json_atomic(layout.progress_file(0, 0), rec(8, NOW + 5, "n0", phase="eval", pause=EVAL))
    reader.opened.clear()
    seen = one.records()
    assert {"progress-0.json", "progress-1.json", "progress-4.json", "progress-5.json"} <= set(reader.opened)
    assert seen[0]["step"] == 8 and seen[0]["pause"]["name"] == "eval"  # read from the record itself
    assert check_hang(NOW + 20, 9_000.0, seen, HealthSettings(hang_timeout_s=10)) is None  # the pause counts
