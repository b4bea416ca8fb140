"""A sweep in the registry (ddpctl.run.sweeps): task ids, which records are one sweep, and the task counts
`list` shows for it. Pure: literal tables."""

from __future__ import annotations

import pytest

from ddpctl.run.registry import JobRecord, parse_record
from ddpctl.run.sweeps import (
    count_line,
    counts,
    group,
    named_task,
    parse_task_id,
    sweep_first,
    sweep_tasks,
    task_list,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123_4", ("123", 4)),
        ("7_0", ("7", 0)),
        ("local-7_2", ("local-7", 2)),  # a local sweep's task
        ("local-7", None),
        (" 12_10 ", ("12", 10)),
        ("123", None),
        ("123_", None),
        ("_4", None),
        ("123_[0-3%2]", None),
        ("sweep_1", None),
        ("1_2_3", None),
    ],
)
def test_parse_task_id(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_task_id(text) == expected


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([], {"running": 0, "pending": 0, "completed": 0, "failed": 0}),
        (["RUNNING", "PENDING", "COMPLETED", "FAILED"], {"running": 1, "pending": 1, "completed": 1, "failed": 1}),
        (["REQUEUED", "PENDING", "COMPLETING"], {"running": 1, "pending": 2, "completed": 0, "failed": 0}),
        (
            ["CANCELLED", "TIMEOUT", "BUDGET_SPENT", "NODE_FAIL"],
            {"running": 0, "pending": 0, "completed": 0, "failed": 4},
        ),
        (["UNKNOWN", "COMPLETED"], {"running": 0, "pending": 0, "completed": 1, "failed": 0}),
    ],
)
def test_counts(states: list[str], expected: dict[str, int]) -> None:
    assert counts(states) == expected


@pytest.mark.parametrize(
    ("states", "line"),
    [
        (["RUNNING", "RUNNING", "PENDING", "COMPLETED"], "4 tasks: 2 running / 1 pending / 1 completed / 0 failed"),
        (["FAILED"], "1 task: 0 running / 0 pending / 0 completed / 1 failed"),
    ],
)
def test_count_line(states: list[str], line: str) -> None:
    assert count_line(states) == line


def record(job_id: str, name: str, sweep: str | None = None, t: float = 0.0) -> JobRecord:
    return JobRecord(job_id=job_id, name=name, run_dir=f"/r/{job_id}", backend="sbatch", submitted_at=t, sweep=sweep)


RECORDS = [
    record("5", "one"),
    record("6_1", "sw", "6"),
    record("6_0", "sw", "6"),
    record("7", "two"),
    record("8_0", "sw", "8"),
    record("9", "plain"),
    record("10_0", "plain", "10"),
]


@pytest.mark.parametrize(
    ("ref", "tasks"),
    [
        ("6", ["6_1", "6_0"][::-1]),  # by its array job id, tasks by index
        ("sw", ["8_0"]),  # by name: the newest sweep of that name
        ("plain", ["10_0"]),  # a name whose newest job is a sweep task
        ("6_1", []),  # a task id is a job, not a sweep
        ("one", []),  # a plain job's name
        ("nosuch", []),
    ],
)
def test_sweep_tasks(ref: str, tasks: list[str]) -> None:
    assert [r.job_id for r in sweep_tasks(RECORDS, ref)] == tasks


def test_a_later_job_of_the_same_name_hides_no_sweep() -> None:
    """Issue 45: after a sweep `sw`, a plain job `sw`: `sweep results sw` and `logs sw_0` still find the sweep;
    `status sw` and `cancel sw` (job or sweep) are the newer job."""
    later = [*RECORDS, record("11", "sw")]
    assert [r.job_id for r in sweep_tasks(later, "sw")] == ["8_0"]
    tasks, task = named_task(later, "sw_0")
    assert ([r.job_id for r in tasks], task.job_id if task else None) == (["8_0"], "8_0")
    assert sweep_first(later, "sw") == []
    assert [r.job_id for r in sweep_first(later, "8")] == ["8_0"]  # by its array job id: always the sweep
    assert [r.job_id for r in sweep_first(RECORDS, "sw")] == ["8_0"]  # the newest of the name is a sweep


@pytest.mark.parametrize(
    ("ref", "sweep", "task"),
    [
        ("sw_0", ["8_0"], "8_0"),  # the sweep's name and a task index: the newest sweep of that name
        ("6_1", ["6_0", "6_1"], "6_1"),  # its array job id and a task (resolve asks this only after job ids)
        ("sw_3", ["8_0"], None),  # a sweep without that task: the caller names its tasks
        ("plain_0", ["10_0"], "10_0"),
        ("one_0", [], None),  # `one` is a plain job, not a sweep
        ("sw", [], None),  # no task index
        ("sw_", [], None),
        ("_0", [], None),
        ("nosuch_1", [], None),
    ],
)
def test_named_task(ref: str, sweep: list[str], task: str | None) -> None:
    tasks, found = named_task(RECORDS, ref)
    assert ([r.job_id for r in tasks], found.job_id if found else None) == (sweep, task)


@pytest.mark.parametrize(
    ("count", "most", "line"),
    [
        (1, 8, "5_0"),
        (3, 8, "5_0, 5_1, 5_2"),
        (8, 8, "5_0, 5_1, 5_2, 5_3, 5_4, 5_5, 5_6, 5_7"),
        (10, 4, "5_0, 5_1, 5_2 ... 5_9 (10 tasks)"),
    ],
)
def test_task_list(count: int, most: int, line: str) -> None:
    assert task_list([record(f"5_{i}", "sw", "5") for i in range(count)], most) == line


def test_group_shows_each_sweep_once_where_it_starts() -> None:
    shown = [(r.job_id, [t.job_id for t in tasks]) for r, tasks in group(RECORDS)]
    assert shown == [
        ("5", []),
        ("6_1", ["6_0", "6_1"]),
        ("7", []),
        ("8_0", ["8_0"]),
        ("9", []),
        ("10_0", ["10_0"]),
    ]


@pytest.mark.parametrize(
    ("line", "sweep", "point"),
    [
        (b'{"job_id": "6_1", "name": "sw", "run_dir": "/r", "backend": "sbatch", "submitted_at": 1}', None, None),
        (
            b'{"job_id": "6_1", "name": "sw", "run_dir": "/r", "backend": "sbatch", "submitted_at": 1, '
            b'"sweep": "6", "point": "env.LR=0.1"}',
            "6",
            "env.LR=0.1",
        ),
    ],
)
def test_registry_lines_with_and_without_a_sweep(line: bytes, sweep: str | None, point: str | None) -> None:
    parsed, problem = parse_record(line)
    assert parsed is not None, problem
    assert (parsed.sweep, parsed.point) == (sweep, point)


def test_a_registry_line_with_a_bad_sweep_is_skipped() -> None:
    line = b'{"job_id": "6_1", "name": "sw", "run_dir": "/r", "backend": "sbatch", "submitted_at": 1, "sweep": 6}'
    assert parse_record(line) == (None, "sweep is 6, not str or NoneType")
