"""The pure parts of `sweep --cluster`: a remote sweep found by array job id, name or `<name>_<task>`; the
cluster's answer as records here; `list`'s lines for remote sweeps."""

from __future__ import annotations

from typing import Any

import pytest

from ddpctl.cli.remote_list import remote_lines
from ddpctl.cli.remote_sweep import task_records
from ddpctl.remote.jobs import RemoteRecord, find_recorded
from ddpctl.run.registry import JobRecord


def task(cluster: str, job_id: str, name: str, at: float, sweep: str | None = None) -> RemoteRecord:
    return RemoteRecord(cluster, JobRecord(job_id, name, "/far/run", "local", at, sweep=sweep))


ROWS = [
    task("a", "7_0", "sw", 1.0, "7"),
    task("a", "7_1", "sw", 1.0, "7"),
    task("b", "9", "plain", 2.0),
    task("b", "local-3_0", "sw2", 3.0, "local-3"),
    task("b", "local-3_1", "sw2", 3.0, "local-3"),
    task("b", "12", "lr_2", 4.0),  # a job whose name looks like a task ref
]


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("7", ("a", "7")),  # an array job id: the whole sweep, asked by that id
        ("sw", ("a", "7")),  # a sweep's name: the same
        ("sw2", ("b", "local-3")),
        ("local-3", ("b", "local-3")),
        ("7_1", ("a", "7_1")),  # a task's id: that task
        ("sw_1", ("a", "7_1")),  # <name>_<task>: that task of the named sweep
        ("sw2_0", ("b", "local-3_0")),
        ("local-3_1", ("b", "local-3_1")),
        ("sw_5", None),  # no task 5
        ("plain_0", None),  # not a sweep
        ("lr_2", ("b", "12")),  # a job of that name wins over the task reading
        ("9", ("b", "9")),
        ("nosuch_1", None),
    ],
)
def test_a_remote_sweep_is_found_by_array_id_name_or_task_ref(ref: str, expected: tuple[str, str] | None) -> None:
    found = find_recorded(ref, ROWS)
    assert (None if found is None else (found.cluster, found.job_ref)) == expected


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        (
            [{"job_id": "7_0", "name": "sw", "run_dir": "/r/7_0", "backend": "sbatch", "sweep": "7", "point": "x=1"}],
            [("7_0", "sw", "/r/7_0", "sbatch", "7", "x=1")],
        ),
        (  # text from the cluster is made visible: list and status print it
            [{"job_id": "7_0", "name": "s\x1b[2Jw", "run_dir": "/r", "backend": "local", "sweep": "7", "point": None}],
            [("7_0", "s^[[2Jw", "/r", "local", "7", None)],
        ),
        ([{"job_id": "7_0", "name": "sw"}, "not a task", {"sweep": "7"}], []),  # no sweep or no id: left out
        ("not a list", []),
        (None, []),
    ],
)
def test_the_clusters_answer_becomes_records_here(tasks: object, expected: list[tuple[Any, ...]]) -> None:
    records = task_records(tasks, "/laptop/spec.yaml", 5.0)
    assert [(r.job_id, r.name, r.run_dir, r.backend, r.sweep, r.point) for r in records] == expected
    assert all((r.submitted_at, r.spec_path) == (5.0, "/laptop/spec.yaml") for r in records)


def rows(states: list[str | None]) -> list[tuple[str, Any, str | None]]:
    tasks = [row for row in ROWS if row.record.sweep == "local-3"]
    plain = next(row for row in ROWS if row.record.job_id == "9")
    return [("b", plain.record, states[0]), *[("b", t.record, s) for t, s in zip(tasks, states[1:], strict=True)]]


@pytest.mark.parametrize(
    ("states", "each_task", "under", "expected"),
    [
        (
            ["RUNNING", "RUNNING", "COMPLETED"],
            False,
            False,
            [("9", "RUNNING"), ("local-3 (sweep)", "2 tasks: 1 running / 0 pending / 1 completed / 0 failed")],
        ),
        ([None, None, None], False, False, [("9", None), ("local-3 (sweep)", "2 tasks")]),  # not asked
        (["RUNNING", "PENDING", None], False, False, [("9", "RUNNING"), ("local-3 (sweep)", "2 tasks")]),
        (
            ["RUNNING", "FAILED", "COMPLETED"],
            False,
            True,
            [
                ("9", "RUNNING"),
                ("local-3 (sweep)", "2 tasks: 0 running / 0 pending / 1 completed / 1 failed"),
                ("  local-3_0", "FAILED"),
                ("  local-3_1", "COMPLETED"),
            ],
        ),
        (  # --json: each task as a job
            ["RUNNING", "FAILED", "COMPLETED"],
            True,
            False,
            [("9", "RUNNING"), ("local-3_0", "FAILED"), ("local-3_1", "COMPLETED")],
        ),
    ],
)
def test_list_shows_a_remote_sweep_once_with_its_tasks_counted(
    states: list[str | None], each_task: bool, under: bool, expected: list[tuple[str, str | None]]
) -> None:
    lines = remote_lines(rows(states), each_task=each_task, under=under)
    assert {line[0] for line in lines} == {"b"}
    assert [(line[2], line[3]) for line in lines] == expected
