"""A sweep's tasks through the real CLI, from a registry alone (no scheduler asked): `list --tasks` puts them
under the sweep's line, and `top`, `logs` and `preempt` of a whole sweep refuse in one line naming its tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Cli

from ddpctl.cli.jobs import list_rows
from ddpctl.run.registry import JobRecord, Registry


def record(job_id: str, name: str, sweep: str | None = None) -> JobRecord:
    return JobRecord(job_id=job_id, name=name, run_dir=f"/r/{job_id}", backend="sbatch", submitted_at=0, sweep=sweep)


RECORDS = [record("5", "one"), record("7_1", "lr", "7"), record("7_0", "lr", "7"), record("8", "two")]


@pytest.mark.parametrize(
    ("each_task", "under", "shown"),
    [
        (False, False, [("5", None), ("7 (sweep)", "2 tasks"), ("8", None)]),
        # --tasks: by index under the sweep's line
        (False, True, [("5", None), ("7 (sweep)", "2 tasks"), ("  7_0", None), ("  7_1", None), ("8", None)]),
        (True, False, [("5", None), ("7_0", None), ("7_1", None), ("8", None)]),  # --json: each task as a job
    ],
)
def test_list_rows(each_task: bool, under: bool, shown: list[tuple[str, str | None]]) -> None:
    rows = list_rows(RECORDS, with_state=False, each_task=each_task, under=under)
    assert [(row[1], row[2]) for row in rows] == shown


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    registry = Registry.from_env({"DDPCTL_HOME": str(tmp_path / "home")})
    for item in RECORDS:
        registry.add(item)
    return Cli(tmp_path / "home", cwd=tmp_path, extra_env={"COLUMNS": "100"})


def test_list_tasks_without_state(cli: Cli) -> None:
    lines = cli.run("list", "--tasks", "--no-state").stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["5", "7", "7_0", "7_1", "8"], lines
    assert lines[3].startswith("  7_0") and "2 tasks" in lines[2], lines


@pytest.mark.parametrize("command", ["top", "logs", "preempt"])
@pytest.mark.parametrize("ref", ["lr", "7"])
def test_a_whole_sweep_is_refused_naming_its_tasks(cli: Cli, command: str, ref: str) -> None:
    done = cli.run(command, ref, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ddpctl: error: {command} {ref}: sweep lr (job array 7) has 2 tasks; name one: 7_0, 7_1 (or lr_<task>)\n"
    )


def test_a_later_job_of_the_same_name_hides_no_sweep(tmp_path: Path) -> None:
    """Issue 45: after a sweep `ex` came a plain job `ex`: `sweep results ex` and `logs ex_0` name the sweep,
    `status ex` the job; the results start with each task's grid values."""
    registry = Registry.from_env({"DDPCTL_HOME": str(tmp_path / "home")})
    for index, lr in enumerate(("0.1", "0.01")):
        run_dir = tmp_path / "runs" / f"local-1_{index}"
        run_dir.mkdir(parents=True)
        registry.add(JobRecord(f"local-1_{index}", "ex", str(run_dir), "local", 1.0, sweep="local-1", point=f"lr={lr}"))
    (tmp_path / "runs" / "local-2").mkdir()
    registry.add(JobRecord("local-2", "ex", str(tmp_path / "runs" / "local-2"), "local", 2.0))
    cli = Cli(tmp_path / "home", cwd=tmp_path)
    results = cli.run("sweep", "results", "ex", "--csv").stdout.splitlines()
    assert [line.split(",")[:2] for line in results[1:]] == [["lr=0.1", "local-1_0"], ["lr=0.01", "local-1_1"]]
    table = cli.run("sweep", "results", "ex").stdout.splitlines()
    assert table[0].split()[:2] == ["point", "run"] and table[1].split()[:2] == ["lr=0.1", "local-1_0"], table
    logs = cli.run("logs", "ex_0", check=False)
    assert "no such job" not in logs.stderr and "local-1_0" in logs.stdout + logs.stderr, logs
    assert cli.status("ex")["job_id"] == "local-2"
