"""`ddpctl sweep` on the real cluster: one job array of 2-node runs, throttled, its tasks' run dirs and results,
the sweep's `list` line and `status` table, a task by its id, `cancel` of one task and of a whole sweep, a task
failing on its point alone, one task preempted and resumed bit-exactly (test_preemption's example trainer and the
session's uninterrupted reference run) while another runs untouched, and a chained task going on in its own job."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import Cli, write_spec
from slurmtools import job_info
from test_preemption import (
    SPEC,
    TOTAL,
    TRAIN,
    Job,
    Reference,
    assert_same_training,
    assert_stop_agreed,
    decisions,
    squeue_row,
)

pytestmark = pytest.mark.slurm

# Reports a loss that depends on the point (LR, SEED) through the heartbeat, then prints it; SLEEP keeps it running;
# SEED=0 fails at once.
SCRIPT = """
import os, time
from ddpctl import runtime
lr, seed = float(os.environ["LR"]), int(os.environ["SEED"])
if seed == 0:
    raise SystemExit("SEED=0: not a seed")  # a bad point: the script fails at start
beat = runtime.Heartbeat(total_steps=3)
for step in range(1, 4):
    time.sleep(1.1)
    beat.step(step, loss=lr * seed / step)
time.sleep(float(os.environ.get("SLEEP", "0")))
beat.close()
print("RESULT", lr, seed, flush=True)
"""


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", cwd=tmp_path, extra_env={"COLUMNS": "200"})


def sweep_spec(tmp_path: Path) -> Path:
    (tmp_path / "point.py").write_text(SCRIPT)
    return write_spec(
        tmp_path / "sw.yaml",
        name="sw",
        script="point.py",
        nodes=2,
        nproc_per_node=1,
        time="00:05:00",
        partition="scale",
        env={"OMP_NUM_THREADS": "1", "LR": "1", "SEED": "1"},
    )


def submit(cli: Cli, *args: str) -> str:
    out = cli.run("sweep", *args).stdout
    return out.split("job array ", 1)[1].split(",")[0]


def queue(array_job: str) -> dict[str, str]:
    done = subprocess.run(
        ["squeue", "-h", "-r", "-j", array_job, "-o", "%i %T"], capture_output=True, text=True, check=False
    )
    return dict(line.split() for line in done.stdout.splitlines() if line.strip())


def test_a_throttled_grid_runs_each_point_in_its_own_run_dir(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    spec = sweep_spec(tmp_path)
    job = cleanup_jobs(
        submit(cli, str(spec), "--grid", "env.LR=0.5,2", "--grid", "env.SEED=1,3", "--max-parallel", "2")
    )
    most_running, throttled = 0, False
    deadline = time.monotonic() + 90
    while (tasks := queue(job)) and time.monotonic() < deadline:
        states = list(tasks.values())
        most_running = max(most_running, states.count("RUNNING"))
        throttled |= states.count("RUNNING") == 2 and "PENDING" in states
        time.sleep(0.3)
    assert not tasks, f"sweep {job} still queued after 90 s: {tasks}"
    assert most_running == 2 and throttled  # two at once, the others held back by the array's %2

    table = cli.run("status", "sw").stdout
    rows = {words[0]: words for words in (line.split() for line in table.splitlines()[2:])}
    assert sorted(rows) == [f"{job}_{i}" for i in range(4)], table
    # Points in grid order (the last key fastest); the final loss is LR * SEED / 3 (the script's last step).
    points = [("0.5", "1"), ("0.5", "3"), ("2", "1"), ("2", "3")]
    for index, (lr, seed) in enumerate(points):
        task, *point, state, step, loss, restarts = rows[f"{job}_{index}"]
        assert point == [f"env.LR={lr}", f"env.SEED={seed}"], table
        assert (state, step, restarts) == ("COMPLETED", "3", "0"), table
        assert float(loss) == pytest.approx(float(lr) * float(seed) / 3, rel=1e-3), table
        run_dir = tmp_path / "runs" / "sw" / task
        job_yaml = (run_dir / "job.yaml").read_text()
        assert f"LR: '{lr}'" in job_yaml and f"SEED: '{seed}'" in job_yaml, job_yaml
        assert f"RESULT {float(lr)} {seed}" in "".join(p.read_text() for p in run_dir.glob("attempt-0/rank-*.log"))
    assert "RESULT 2.0 3" in cli.run("logs", f"{job}_3").stdout  # a task id is a job for every command
    assert json.loads(cli.run("status", f"{job}_1", "--json").stdout)["state"] == "COMPLETED"

    listed = cli.run("list").stdout
    assert f"{job} (sweep)" in listed and "4 tasks: 0 running / 0 pending / 4 completed / 0 failed" in listed, listed
    best = cli.run("sweep", "results", str(tmp_path / "runs" / "sw")).stdout.splitlines()[1]
    # Each row leads with its point's values (issue 45 item 4); 0.5 * 1 / 3 is the lowest final loss.
    assert best.split()[:4] == ["*", "env.LR=0.5", "env.SEED=1", f"{job}_0"], best


def test_cancel_of_one_task_then_of_the_sweep_ends_every_task(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    spec = sweep_spec(tmp_path)
    job = cleanup_jobs(submit(cli, str(spec), "--grid", "env.SEED=1,2,3", "--set", "env.SLEEP=120"))
    cli.wait_for(lambda: list(queue(job).values()).count("RUNNING") >= 2, timeout=60, what="two tasks running")
    # One task by its id: it alone leaves the queue, the others run on.
    cli.run("cancel", f"{job}_0")
    cli.wait_for(lambda: f"{job}_0" not in queue(job), timeout=60, what="task 0 to leave the queue")
    assert sorted(queue(job)) == [f"{job}_1", f"{job}_2"] and "RUNNING" in queue(job).values(), queue(job)
    assert cli.status(f"{job}_0")["state"] == "CANCELLED"
    assert "cancelled sweep sw" in cli.run("cancel", "sw").stdout
    cli.wait_for(lambda: not queue(job), timeout=60, what="the array to leave the queue")
    table = cli.run("status", job).stdout
    states = [line.split()[-4] for line in table.splitlines()[2:]]
    assert states == ["CANCELLED"] * 3, table
    assert "3 tasks: 0 running / 0 pending / 0 completed / 3 failed" in cli.run("list").stdout
    again = cli.run("cancel", job, check=False)
    assert again.returncode == 1 and f"sweep sw (job array {job}) already ended: 3 tasks" in again.stderr


def test_a_task_failing_on_its_point_fails_alone(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    job = cleanup_jobs(submit(cli, str(sweep_spec(tmp_path)), "--grid", "env.SEED=1,0,3"))
    cli.wait_for(lambda: not queue(job), timeout=120, what="every task to end")
    table = cli.run("status", "sw").stdout
    states = {words[0]: words[-4] for words in (line.split() for line in table.splitlines()[2:])}
    assert states == {f"{job}_0": "COMPLETED", f"{job}_1": "FAILED", f"{job}_2": "COMPLETED"}, table
    listed = cli.run("list", "--tasks").stdout.splitlines()
    assert any("3 tasks: 0 running / 0 pending / 2 completed / 1 failed" in line for line in listed), listed
    assert [line.split()[:3:2] for line in listed if line.startswith(f"  {job}_")] == [
        [f"{job}_0", "COMPLETED"],
        [f"{job}_1", "FAILED"],
        [f"{job}_2", "COMPLETED"],
    ], listed
    # Ranked by the sweep's name: the two that reported a loss (SEED 1 best), then the failed one with its state.
    ranked = [line.split()[:3] for line in cli.run("sweep", "results", "sw").stdout.splitlines()[1:]]
    assert ranked == [
        ["*", "env.SEED=1", f"{job}_0"],
        ["env.SEED=3", f"{job}_2", "COMPLETED"],
        ["env.SEED=0", f"{job}_1", "FAILED"],
    ], ranked
    assert "SEED=0: not a seed" in cli.run("logs", "sw_1").stdout  # the sweep's name and the task
    assert f"{job}_2" in cli.run("top", "--once", "sw_2").stdout


def paced_pair(cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], *extra: str) -> tuple[Job, Job]:
    """A 2-task sweep of test_preemption's example trainer (12 steps, a checkpoint every 4) at two paces, on
    partition `scale` (`debug` has 2 nodes): the pace changes no weight, so both tasks must end with the session's
    uninterrupted reference weights; task 1 is slow, so it runs throughout task 0's stop and resume."""
    paces = [json.dumps([*TRAIN, "--ckpt-every", "4", "--sleep-per-step", s]) for s in ("0.5", "1.5")]
    run_dir, grid = f"run_dir={tmp_path / 'runs'}", "args=" + ",".join(paces)
    array = cleanup_jobs(submit(cli, str(SPEC), "--set", run_dir, "--set", "partition=scale", *extra, "--grid", grid))
    first, second = (Job(cli, f"{array}_{i}", tmp_path / "runs" / "example" / f"{array}_{i}") for i in (0, 1))
    return first, second


# One version in CI: the array's tasks are ddpctl's runs; the sweep's Slurm side (array, throttle, cancel, a failing
# task) runs on 24.11 in the other tests here, a preemption's in tests/integration/test_preemption.py.
@pytest.mark.one_slurm_version
def test_one_task_preempted_resumes_exactly_while_the_other_runs_untouched(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, cleanup_jobs, reference: Reference
) -> None:
    hit, other = paced_pair(cli, tmp_path, cleanup_jobs)
    hit.wait_step(0, 3)
    other.wait_step(0, 1)
    cli.run("preempt", hit.job_id)
    hit.wait_requeued(0)
    # Task 0 is back in the queue (or already restarted) while task 1 keeps running in its first allocation.
    assert squeue_row(other.job_id) == ("RUNNING", "None"), other.dump()
    assert other.attempts() == 1 and other.last_step(0) < TOTAL, other.dump()
    hit_status, other_status = hit.wait_terminal(), other.wait_terminal()

    step = assert_stop_agreed(hit, 0)
    assert decisions(hit) == [("requeue", "preemption"), ("finish", None)], hit.dump()
    # Both attempts in the task's one Slurm job (its raw id in SLURM_JOB_ID), the other task's is another.
    hit_ids = [e["job_id"] for e in hit.events("attempt-start")]
    assert len(hit_ids) == 2 and hit_ids[0] == hit_ids[1], hit.dump()
    assert hit_status["restarts"] == 1 and hit.resumed_from(1) == step, f"{hit_status}\n{hit.dump()}"
    assert_same_training(hit, reference, hit_status)
    # The other task: one attempt under its own id, never signalled, never requeued (Slurm's count too).
    other_ids = [e["job_id"] for e in other.events("attempt-start")]
    assert len(other_ids) == 1 and other_ids[0] != hit_ids[0], other.dump()
    assert other_status["restarts"] == 0 and not other.events("signal"), f"{other_status}\n{other.dump()}"
    assert job_info(other.job_id).get("Restarts") == "0", job_info(other.job_id)
    assert_same_training(other, reference, other_status)


# The successor is a plain sbatch job with a dependency, as a single chained run's: its Slurm side is
# test_chain_slurm's on both versions; what is the sweep's own (a task's script, its run dir) runs here once.
@pytest.mark.one_slurm_version
def test_a_chained_task_continues_in_its_own_successor_job(  # type: ignore[no-untyped-def]
    cli: Cli, tmp_path: Path, cleanup_jobs, reference: Reference
) -> None:
    # With requeue.mode chain (what auto picks where a job may not requeue itself) the preempted task goes on in
    # a new plain job on its run dir, never a new array, and ends with the reference weights.
    hit, other = paced_pair(cli, tmp_path, cleanup_jobs, "--set", "requeue.mode=chain")
    hit.wait_step(0, 3)
    cli.run("preempt", hit.job_id)
    hit_status, other_status = hit.wait_terminal(), other.wait_terminal()

    step = assert_stop_agreed(hit, 0)
    assert decisions(hit) == [("requeue", "preemption"), ("finish", None)], hit.dump()
    (chained,) = hit.events("chain-submit")
    cleanup_jobs(chained["job_id"])
    # Attempt 1 ran in the successor: a job of its own, outside the array (its queue record is no array task).
    hit_ids = [e["job_id"] for e in hit.events("attempt-start")]
    assert hit_ids[1] == chained["job_id"] != hit_ids[0], hit.dump()
    assert job_info(chained["job_id"]).get("ArrayJobId") is None, job_info(chained["job_id"])
    assert hit_status["state"] == "COMPLETED" and hit.resumed_from(1) == step, f"{hit_status}\n{hit.dump()}"
    assert_same_training(hit, reference, hit_status)
    # The other task: one attempt in its array task, no successor.
    assert len(other.events("attempt-start")) == 1 and not other.events("chain-submit"), other.dump()
    assert other_status["restarts"] == 0, f"{other_status}\n{other.dump()}"
    assert_same_training(other, reference, other_status)
