"""A sweep on the local backend, end to end with real processes (no Slurm): one detached queue starts each task
as a local job, --max-parallel at a time; `list`, `status`, `cancel` of the sweep and of a task, `sweep
results`, the API's wait and results, and what status says once the queue is gone."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import time
from pathlib import Path

import pytest
import yaml
from clitools import EXAMPLE_SCRIPT, REPO, Cli, events, write_spec

import ddpctl
from ddpctl.backends.local import processes as local_proc

pytestmark = pytest.mark.torchrun

QUICK = ["--epochs", "1", "--samples", "128", "--batch-size", "32", "--accum", "1"]  # 4 steps of one rank


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    empty = tmp_path / "empty-bin"  # no sbatch/srun/scontrol to be found: the local backend needs none
    empty.mkdir()
    return Cli(tmp_path / "home", cwd=tmp_path, extra_env={"PATH": str(empty), "COLUMNS": "100"})


def spec(tmp_path: Path, name: str, *extra: str) -> Path:
    """The example trainer on one simulated node, one rank: a task takes seconds."""
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        script=str(EXAMPLE_SCRIPT),
        args=[*QUICK, *extra],
        nodes=1,
        nproc_per_node=1,
        run_dir=str(tmp_path / "runs"),
        env={"OMP_NUM_THREADS": "1"},
        backend="local",
    )


def task_dirs(tmp_path: Path, name: str, sweep: str, count: int) -> list[Path]:
    return [tmp_path / "runs" / name / f"{sweep}_{index}" for index in range(count)]


def sweep_id(out: str) -> str:
    return out.split("submitted sweep ", 1)[1].split()[1]


def sweep_line(cli: Cli, sweep: str) -> str:
    """`list`'s state cell for the sweep, its wrapped lines joined (the table is at most 100 columns wide)."""
    head, *rows = cli.run("list").stdout.splitlines()
    start, end = head.index("state"), head.index("backend")
    at = next(i for i, row in enumerate(rows) if row.startswith(f"{sweep} (sweep)"))
    cell = [rows[at][start:end].strip()]
    cell += [row[start:end].strip() for row in rows[at + 1 :] if not row[:start].strip()]
    return " ".join(cell)


def started(run_dir: Path) -> bool:
    return (run_dir / "attempt-0").exists()


def readme_commands() -> list[str]:
    """The README's local sweep commands, as written (comments cut)."""
    text = (REPO / "README.md").read_text().split("**On this machine (local backend, no Slurm).**", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_readme_local_sweep_runs_one_task_at_a_time_and_ranks_results(tmp_path: Path) -> None:
    # The README's commands in a fresh checkout-like dir and registry; the sweep line gets what makes each task
    # seconds long (one node, one rank, 4 steps) and says --max-parallel 1 (the local default) explicitly.
    shutil.copytree(REPO / "jobs", tmp_path / "jobs")
    cli = Cli(tmp_path / "home", cwd=tmp_path, extra_env={"PATH": os.environ["PATH"], "COLUMNS": "100"})
    commands = readme_commands()
    assert [c.split()[:3] for c in commands] == [
        ["ddpctl", "sweep", "jobs/example.yaml"],
        ["ddpctl", "list"],
        ["ddpctl", "status", "example"],
        ["ddpctl", "logs", "local-1_0"],
        ["ddpctl", "sweep", "results"],
    ]
    quick = ["--set", "nodes=1", "--set", "nproc_per_node=1", "--set", f"args={json.dumps(QUICK)}"]
    out = cli.run(*shlex.split(commands[0])[1:], *quick, "--max-parallel", "1").stdout
    assert sweep_id(out) == "local-1"
    dirs = task_dirs(tmp_path, "example", "local-1", 2)
    assert "local-1 (sweep)" in cli.run("list").stdout
    table = cli.run(*shlex.split(commands[2])[1:]).stdout
    assert "local-1_0  env.LR=0.1" in table and "local-1_1  env.LR=0.01" in table, table
    most = 0
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and not all(started(d) and not local_proc.lock_held(d) for d in dirs):
        most = max(most, sum(local_proc.lock_held(d) for d in dirs))
        time.sleep(0.2)
    assert most == 1, "never more (and at least once exactly) one task running"
    listed = [json.loads(line) for line in cli.run("list", "--json").stdout.splitlines()]
    assert [(job["job_id"], job["state"], job["point"]) for job in listed] == [
        ("local-1_0", "COMPLETED", "env.LR=0.1"),
        ("local-1_1", "COMPLETED", "env.LR=0.01"),
    ]
    assert sweep_line(cli, "local-1") == "2 tasks: 0 running / 0 pending / 2 completed / 0 failed"
    # One after the other: the second task's attempt began after the first one's decision.
    decided = next(e["t"] for e in events(dirs[0]) if e["event"] == "decision")
    assert next(e["t"] for e in events(dirs[1]) if e["event"] == "attempt-start") >= decided
    for run_dir, lr in zip(dirs, ("0.1", "0.01"), strict=True):
        assert yaml.safe_load((run_dir / "job.yaml").read_text())["env"]["LR"] == lr
        assert json.loads((run_dir / "snapshot.json").read_text())["path"] == "code"  # each task its own copy
    assert "[example] step" in cli.run(*shlex.split(commands[3])[1:], "--no-color").stdout
    ranked = cli.run(*shlex.split(commands[4])[1:], "--json").stdout
    runs = [json.loads(line) for line in ranked.splitlines()]
    assert sorted(r["run"] for r in runs) == ["local-1_0", "local-1_1"] and runs[0]["best_point"]
    assert [r["state"] for r in runs] == ["COMPLETED", "COMPLETED"], runs  # the sweep's name, from the registry
    assert sorted(r["point"] for r in runs) == ["env.LR=0.01", "env.LR=0.1"], runs  # each task's grid values
    losses = [r["final"]["loss"] for r in runs]
    assert losses == sorted(losses) and len(set(losses)) == 2, "each point trained with its own LR"
    assert "*" in cli.run(*shlex.split(commands[4])[1:]).stdout


def test_cancel_of_the_sweep_while_its_first_task_runs(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDPCTL_HOME", cli.env["DDPCTL_HOME"])  # the API here, the CLI there: one registry
    sw = ddpctl.sweep(spec(tmp_path, "slow", "--sleep-per-step", "2"), grid={"env.LR": [0.1, 0.01, 0.001]})
    dirs = [job.run_dir for job in sw.jobs]
    rank0 = dirs[0] / "attempt-0" / "rank-0.log"
    cli.wait_for(lambda: rank0.exists() and "step 1/" in rank0.read_text(), timeout=60, what="task 0 training")
    assert [job.status().state for job in sw.jobs] == ["RUNNING", "PENDING", "PENDING"]

    done = cli.run("cancel", "slow")
    assert done.stdout.startswith(f"cancelled sweep slow: local queue {sw.array_job}, 3 tasks"), done.stdout
    states = sw.wait(timeout=60, poll_s=0.5)
    assert [state.state for state in states] == ["CANCELLED"] * 3
    assert [e["event"] for e in events(dirs[0])].count("cancelled") == 1
    home = tmp_path / "runs" / "slow" / f"sweep-{sw.array_job}"
    cli.wait_for(lambda: not local_proc.lock_held(home), timeout=10, what="the queue to end")
    time.sleep(1.0)  # more than the queue's poll: had it survived, it would have started task 1 by now
    assert not started(dirs[1]) and not started(dirs[2])
    assert "never started" in states[1].reason
    assert sweep_line(cli, sw.array_job) == "3 tasks: 0 running / 0 pending / 0 completed / 3 failed"
    assert next(ranked.task.run_dir for ranked in sw.results()) == dirs[0]  # the only one that reported
    refused = cli.run("cancel", "slow", check=False)
    assert refused.returncode != 0 and "already ended" in refused.stderr, refused


def test_status_does_not_lie_once_the_queue_is_gone(cli: Cli, tmp_path: Path) -> None:
    out = cli.run("sweep", str(spec(tmp_path, "gone", "--sleep-per-step", "2")), "--grid", "env.LR=0.1,0.01,0.001")
    sweep = sweep_id(out.stdout)
    dirs = task_dirs(tmp_path, "gone", sweep, 3)
    cli.wait_for(lambda: local_proc.lock_held(dirs[0]), timeout=30, what="task 0 to start")
    cli.run("cancel", f"{sweep}_2")  # a task before its turn: it never starts
    assert cli.status(f"{sweep}_2")["state"] == "CANCELLED"

    home = tmp_path / "runs" / "gone" / f"sweep-{sweep}"
    os.kill(int((home / "supervisor.pid").read_text().split()[0]), signal.SIGKILL)  # the queue dies
    cli.wait_for(lambda: not local_proc.lock_held(home), timeout=10, what="the queue's lock to be let go")
    waiting = cli.status(f"{sweep}_1")
    assert waiting["state"] == "FAILED" and "never started: the sweep's queue process is gone" in waiting["reason"]
    assert cli.status(f"{sweep}_0")["state"] == "RUNNING"  # its own supervisor, in its own session, goes on
    cli.run("cancel", f"{sweep}_0")
    assert cli.wait_terminal(f"{sweep}_0", timeout=60)["state"] == "CANCELLED"
    assert sweep_line(cli, sweep) == "3 tasks: 0 running / 0 pending / 0 completed / 3 failed"
    assert not started(dirs[1]) and not started(dirs[2])


def test_cancel_of_a_running_task_frees_its_slot_for_the_next(cli: Cli, tmp_path: Path) -> None:
    out = cli.run("sweep", str(spec(tmp_path, "next", "--sleep-per-step", "2")), "--grid", "env.LR=0.1,0.01")
    sweep = sweep_id(out.stdout)
    dirs = task_dirs(tmp_path, "next", sweep, 2)
    cli.wait_for(lambda: local_proc.lock_held(dirs[0]), timeout=30, what="task 0 to start")
    assert cli.status(f"{sweep}_1")["state"] == "PENDING"
    cli.run("cancel", f"{sweep}_0")  # a running task: cancelled as a local job is
    cli.wait_for(lambda: local_proc.lock_held(dirs[1]), timeout=30, what="the queue to start task 1")
    assert cli.wait_terminal(f"{sweep}_0", timeout=30)["state"] == "CANCELLED"
    cli.run("cancel", sweep)
    assert cli.wait_terminal(f"{sweep}_1", timeout=60)["state"] == "CANCELLED"
    assert [e["event"] for e in events(dirs[1])].count("cancelled") == 1
