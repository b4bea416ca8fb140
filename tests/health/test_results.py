"""A sweep's results (ddpctl.health.results): each task's final and best heartbeat values, and the ranking.
Literal tables for the pure parts; run dirs written to tmp_path for the readers (symlinks never followed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpctl.errors import DdpctlError
from ddpctl.health.results import TaskResult, find_tasks, from_records, rank, read_task


def task(name: str, final: dict[str, float], low: dict[str, float], high: dict[str, float]) -> TaskResult:
    return TaskResult(Path("/runs/lr") / name, 10, final, low, high)


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([], (None, {}, {}, {})),
        (
            [{"step": 5, "values": {"loss": 2.0}, "extremes": {"loss": [1.5, 3.0]}}],
            (5, {"loss": 2.0}, {"loss": 1.5}, {"loss": 3.0}),
        ),
        (  # across attempts: final from the newest, lowest/highest over all; a step-less newest keeps the step
            [
                {"step": 5, "values": {"loss": 2.0}, "extremes": {"loss": [1.5, 3.0]}},
                {"step": None, "values": {"loss": 1.8, "acc": 0.4}, "extremes": {"loss": [1.8, 2.2], "acc": [0.4] * 2}},
            ],
            (5, {"loss": 1.8, "acc": 0.4}, {"loss": 1.5, "acc": 0.4}, {"loss": 3.0, "acc": 0.4}),
        ),
        (  # a record without extremes counts its last values; junk is left out
            [
                {"step": 7, "values": {"loss": 0.9, "s": "inf", "b": True}},
                {"step": 8, "values": "x", "extremes": {"loss": ["a", 1], "acc": [0.1], "f": [1, float("nan")]}},
            ],
            (8, {}, {"loss": 0.9}, {"loss": 0.9}),
        ),
    ],
)
def test_from_records(records: list[dict[str, Any]], expected: tuple[Any, ...]) -> None:
    result = from_records(Path("/runs/lr/1_0"), records)
    assert (result.step, dict(result.final), dict(result.low), dict(result.high)) == expected


def test_rank_min_and_max() -> None:
    tasks = [
        task("1_0", {"loss": 0.5}, {"loss": 0.4}, {"loss": 2.0}),
        task("1_1", {"acc": 0.9}, {"acc": 0.1}, {"acc": 0.9}),
        task("1_2", {"loss": 0.3}, {"loss": 0.3}, {"loss": 1.0}),
        task("1_3", {"loss": 0.6}, {"loss": 0.3}, {"loss": 3.0}),
    ]
    assert [(r.task.name, r.best_point) for r in rank(tasks, "loss", "min")] == [
        ("1_2", True),  # best 0.3, final 0.3 before 1_3's best 0.3, final 0.6
        ("1_3", False),
        ("1_0", False),
        ("1_1", False),  # no loss: last
    ]
    assert [(r.task.name, r.best_point) for r in rank(tasks, "loss", "max")] == [
        ("1_3", True),
        ("1_0", False),
        ("1_2", False),
        ("1_1", False),
    ]
    assert [r.best_point for r in rank(tasks, "ppl", "min")] == [False] * 4  # nobody reported it: none marked


def write_run(run_dir: Path, attempts: dict[int, dict[int, dict[str, Any]]]) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text("name: lr\n")
    for attempt, ranks in attempts.items():
        (run_dir / f"attempt-{attempt}").mkdir()
        for r, record in ranks.items():
            (run_dir / f"attempt-{attempt}" / f"progress-{r}.json").write_text(json.dumps({"rank": r, **record}))
    return run_dir


def test_read_task_takes_the_lowest_rank_of_each_attempt(tmp_path: Path) -> None:
    run = write_run(
        tmp_path / "lr" / "7_0",
        {
            0: {0: {"step": 4, "values": {"loss": 1.0}, "extremes": {"loss": [1.0, 4.0]}}},
            1: {
                1: {"step": 9, "values": {"loss": 9.0}, "extremes": {"loss": [0.1, 9.0]}},  # rank 1: not read
                0: {"step": 9, "values": {"loss": 0.7}, "extremes": {"loss": [0.7, 0.9]}},
            },
        },
    )
    result = read_task(run)
    assert (result.step, dict(result.final), dict(result.low), dict(result.high)) == (
        9,
        {"loss": 0.7},
        {"loss": 0.7},
        {"loss": 4.0},
    )


def test_read_task_does_not_follow_a_symlinked_record(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"step": 3, "values": {"loss": 0.1}}))
    run = write_run(tmp_path / "lr" / "7_0", {0: {}})
    (run / "attempt-0" / "progress-0.json").symlink_to(secret)
    assert read_task(run) == TaskResult(run)


def test_find_tasks(tmp_path: Path) -> None:
    sweep = tmp_path / "lr"
    runs = [write_run(sweep / name, {}) for name in ("7_1", "7_0", "7_10")]
    (sweep / "not-a-run").mkdir()
    (sweep / "7_2").symlink_to(runs[0])  # a symlinked run dir is skipped
    assert find_tasks([sweep]) == [sweep / "7_0", sweep / "7_1", sweep / "7_10"]
    assert find_tasks([runs[1], runs[0]]) == [runs[1], runs[0]]
    with pytest.raises(DdpctlError, match=r"^.*/missing: not a run dir or a directory of run dirs \("):
        find_tasks([tmp_path / "missing"])
