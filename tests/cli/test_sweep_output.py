"""`ddpctl sweep results` output with each task's job state: a literal table, JSON and CSV (pure printing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpctl.cli.sweep_output import print_results
from ddpctl.health.results import Ranked, TaskResult

RANKED = [
    Ranked(TaskResult(Path("/r/7_1"), 12, {"loss": 0.3}, {"loss": 0.3}, {"loss": 1.0}), best_point=True),
    Ranked(TaskResult(Path("/r/7_0"), 5, {"loss": 0.5}, {"loss": 0.4}, {"loss": 2.0}), best_point=False),
    Ranked(TaskResult(Path("/r/7_2")), best_point=False),  # failed before it reported anything
]
STATES = {Path("/r/7_1"): "COMPLETED", Path("/r/7_0"): "RUNNING", Path("/r/7_2"): "FAILED"}


def test_table_with_states(capsys: pytest.CaptureFixture[str]) -> None:
    print_results(RANKED, "loss", "min", "table", states=STATES)
    assert capsys.readouterr().out.splitlines() == [
        "   run  state      step  loss final  loss min",
        "*  7_1  COMPLETED    12         0.3       0.3",
        "   7_0  RUNNING       5         0.5       0.4",  # partial: still running
        "   7_2  FAILED        -           -         -",
    ]


def test_json_and_csv_with_states(capsys: pytest.CaptureFixture[str]) -> None:
    print_results(RANKED, "loss", "min", "json", states={Path("/r/7_2"): "FAILED"})
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["run"], r["state"], r["best_point"]) for r in rows] == [
        ("7_1", None, True),
        ("7_0", None, False),
        ("7_2", "FAILED", False),
    ]
    print_results(RANKED, "loss", "min", "csv", states=STATES)
    assert capsys.readouterr().out.splitlines() == [
        "point,run,run_dir,state,step,loss_final,loss_min,best_point",
        ",7_1,/r/7_1,COMPLETED,12,0.3,0.3,1",
        ",7_0,/r/7_0,RUNNING,5,0.5,0.4,0",
        ",7_2,/r/7_2,FAILED,,,,0",
    ]


POINTS = {Path("/r/7_0"): "lr=0.1 batch=32", Path("/r/7_1"): "lr=0.01 batch=32", Path("/r/7_2"): "lr=1 batch=64"}


def test_each_tasks_grid_values_come_first(capsys: pytest.CaptureFixture[str]) -> None:
    print_results(RANKED, "loss", "min", "table", states=STATES, points=POINTS)
    assert capsys.readouterr().out.splitlines() == [
        "   point             run  state      step  loss final  loss min",
        "*  lr=0.01 batch=32  7_1  COMPLETED    12         0.3       0.3",
        "   lr=0.1 batch=32   7_0  RUNNING       5         0.5       0.4",
        "   lr=1 batch=64     7_2  FAILED        -           -         -",
    ]
    print_results(RANKED, "loss", "min", "json", points=POINTS)
    assert [json.loads(line)["point"] for line in capsys.readouterr().out.splitlines()] == [
        "lr=0.01 batch=32",
        "lr=0.1 batch=32",
        "lr=1 batch=64",
    ]


def test_columns_no_task_has_a_value_for_are_left_out_and_why_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    """A plain script reports no step and no loss: three columns of "-" said nothing."""
    plain = [Ranked(TaskResult(Path(f"/r/9_{i}")), best_point=False) for i in range(2)]
    print_results(plain, "loss", "min", "table", states={Path("/r/9_0"): "COMPLETED"}, points=POINTS)
    out, err = capsys.readouterr()
    assert out.splitlines() == ["  run  state", "  9_0  COMPLETED", "  9_1  -"]
    assert err.splitlines() == [
        "no task reported a step: ddpctl.runtime's Heartbeat (beat.step(...)) reports them",
        "no task reported loss (beat.step(..., loss=...))",
    ]
