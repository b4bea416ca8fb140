"""requeue.mode chain on the real local Slurm cluster: the run continues in new jobs where self-requeue is not
the cluster's way (partition `lowprio2`: PreemptMode=CANCEL, so `auto` picks chain).

Reuses test_preemption's helpers: the example job (2 nodes x 2 ranks, 12 steps), its uninterrupted local
reference run, and the checks that every step's loss and the final weights equal the reference's.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import test_preemption
import yaml
from clitools import Cli, final_hash
from slurmtools import sbatch_text
from test_preemption import (
    TOTAL,
    Job,
    LogFollower,
    Reference,
    assert_same_training,
    assert_stop_agreed,
    decisions,
    paced,
    squeue_row,
)

# The chains run on the second pair's partitions (debug2, lowprio2, urgent2), beside the other cluster tests: they
# mostly wait on paced steps and a time limit (tests/cluster/README.md, "Which tests run alone").
pytestmark = [pytest.mark.slurm, pytest.mark.second_pair]
cli = test_preemption.cli  # the same fixture; `reference` is the session's (tests/conftest.py)

DEBUG2 = ("partition=debug2",)
LOWPRIO2 = ("partition=lowprio2",)


def chain_ids(job: Job) -> list[str]:
    """The run's jobs: the first, then every successor submitted (dropped ones included)."""
    return [job.job_id] + [e["job_id"] for e in job.events("chain-submit")]


def live(job: Job) -> list[str]:
    return [j for j in chain_ids(job) if squeue_row(j) is not None]


def attempt_started(job: Job, attempt: int) -> Callable[[], bool]:
    return lambda: any(e["attempt"] == attempt for e in job.events("attempt-start"))


def preempt_by_urgent(job: Job, cleanup: Callable[[str], str], attempt: int, after_step: int, hold_s: int = 1) -> int:
    """Wait for `attempt` to train past `after_step`, preempt it with an urgent2 job; return its stop step."""
    job.wait_step(attempt, after_step + 1)
    cleanup(sbatch_text(f"sleep {hold_s}", "-p", "urgent2", "-N2", "-J", "ddpctl-test-urgent"))
    job.wait(lambda: job.decision(attempt) is not None, f"the decision of attempt {attempt}", 90)
    decision = job.decision(attempt)
    assert decision is not None and (decision["action"], decision["kind"]) == ("requeue", "preemption"), job.dump()
    return assert_stop_agreed(job, attempt)


def set_sleep(job: Job, seconds: float | None) -> None:
    """Change the sleep per step the next attempts train with (the weights do not depend on it)."""
    spec_file = job.run_dir / "job.yaml"
    spec = yaml.safe_load(spec_file.read_text())
    args = list(spec["args"])
    if "--sleep-per-step" in args:
        cut = args.index("--sleep-per-step")
        del args[cut : cut + 2]
    spec["args"] = args + (["--sleep-per-step", str(seconds)] if seconds else [])
    tmp = spec_file.with_name(".job.yaml.test")
    tmp.write_text(yaml.safe_dump(spec, sort_keys=False))
    tmp.replace(spec_file)


def assert_one_job_at_a_time(job: Job) -> None:
    """Every attempt started after the previous attempt's nodes had all exited, each in its own job."""
    starts = {e["attempt"]: e for e in job.events("attempt-start")}
    for attempt in range(1, len(starts)):
        exits = [e["t"] for e in job.events("node-exit") if e["attempt"] == attempt - 1]
        assert exits and starts[attempt]["t"] > max(exits), f"attempt {attempt} overlapped\n{job.dump()}"
    assert len({e["job_id"] for e in starts.values()}) == len(starts), job.dump()


# --- twice preempted (cancelled) on lowprio2, once run into its time limit -------------------------------------------
# A 3-minute limit: a preemption must come with more than lead_s + 45 s left, or it counts as the time limit.
def test_chain_survives_two_cancelling_preemptions_and_a_time_limit(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    job = paced(cli, tmp_path, cleanup_jobs, 4, "2", *LOWPRIO2, "time=00:03:00", "requeue.lead_s=60")

    def register() -> None:
        for job_id in chain_ids(job):
            cleanup_jobs(job_id)

    mode = job.events("requeue-mode")
    assert [e["mode"] for e in mode] == ["chain"] and "lowprio2 has PreemptMode=CANCEL" in mode[0]["why"], mode
    follower = LogFollower(cli, job.job_id)
    try:
        stops = [preempt_by_urgent(job, cleanup_jobs, 0, 0)]
        register()
        job.wait(attempt_started(job, 1), "attempt 1 in the successor job", 120)
        # Attempt 2 must meet the time limit: slow it down while the urgent job holds the nodes.
        stops.append(preempt_by_urgent(job, cleanup_jobs, 1, stops[0], hold_s=15))
        set_sleep(job, 25.0)  # the warning comes 90-120 s in: the 8 or so steps left must not be done by then
        register()
        job.wait(attempt_started(job, 2), "attempt 2 in the next successor job", 120)
        job.wait(lambda: any(e["attempt"] == 2 for e in job.events("signal")), "the time-limit warning", 180)
        set_sleep(job, None)  # attempt 3 trains at full speed
        register()
        status = job.wait_terminal(timeout=300)
        register()
        code = follower.finish()
    finally:
        follower.kill()

    signals = [(e["attempt"], e["kind"]) for e in job.events("signal")]
    assert signals == [(0, "preemption"), (1, "preemption"), (2, "timeout")], job.dump()
    assert decisions(job) == [("requeue", "preemption")] * 2 + [("requeue", "timeout"), ("finish", None)], job.dump()
    stops.append(assert_stop_agreed(job, 2))
    assert [job.resumed_from(a) for a in (1, 2, 3)] == stops, job.dump()
    jobs = chain_ids(job)
    assert len(jobs) == 4 and [e["job_id"] for e in job.events("attempt-start")] == jobs, job.dump()
    assert_one_job_at_a_time(job)
    assert status["restarts"] == 3 and status["job_id"] == job.job_id, f"{status}\n{job.dump()}"
    assert_same_training(job, reference, status)
    time.sleep(1)
    assert live(job) == [], job.dump()
    assert code == 0 and follower.lines[-1] == f"-- job {job.job_id} COMPLETED --", follower.lines[-10:]
    seen = {line[:4] for line in follower.lines if line.startswith("[a")}
    assert {"[a0 ", "[a1 ", "[a2 ", "[a3 "} <= seen, sorted(seen)


# --- cancel ends the whole run, a pending successor included -------------------------------------------------------
def test_cancel_of_a_chained_run_leaves_no_job_behind(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    doctor = cli.run("doctor", "jobs/example.yaml", "--set", "partition=lowprio2", check=False).stdout
    assert "requeue mode: chain (partition lowprio2 has PreemptMode=CANCEL" in doctor, doctor
    job = paced(cli, tmp_path, cleanup_jobs, 4, "2", *DEBUG2, "requeue.mode=chain")
    job.wait_step(0, 1)
    cli.run("preempt", job.job_id)  # the signal submits the successor at once; it waits on this job
    job.wait(lambda: job.events("chain-submit"), "the successor's submission", 60)
    successor = job.events("chain-submit")[0]["job_id"]
    cleanup_jobs(successor)
    assert (squeue_row(successor) or ("",))[0] == "PENDING", job.dump()
    cli.run("cancel", job.job_id)
    job.wait(lambda: live(job) == [], "no job of the run in the queue", 60)
    status = job.wait_terminal(timeout=60)
    assert status["state"] == "CANCELLED", f"{status}\n{job.dump()}"
    assert not any(e["attempt"] == 1 for e in job.events("attempt-start")), job.dump()
    time.sleep(3)
    assert live(job) == [] and cli.status(job.job_id)["state"] == "CANCELLED", job.dump()


# --- a spent budget ends the chain ---------------------------------------------------------------------------------
@pytest.mark.one_slurm_version  # ddpctl's budget; the chain itself runs on 24.11 in the tests above and below
def test_spent_budget_ends_the_chain(cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]) -> None:
    job = paced(cli, tmp_path, cleanup_jobs, 4, "0.5", *DEBUG2, "requeue.mode=chain", "requeue.max_preemptions=1")
    job.wait_step(0, 1)
    cli.run("preempt", job.job_id)
    job.wait(attempt_started(job, 1), "attempt 1 in the successor job", 120)
    for successor in chain_ids(job)[1:]:
        cleanup_jobs(successor)
    job.wait_step(1, assert_stop_agreed(job, 0) + 1)
    cli.run("preempt", job.job_id)  # reaches the successor: preempt follows the chain
    status = job.wait_terminal(timeout=120)
    for successor in chain_ids(job)[1:]:
        cleanup_jobs(successor)

    assert status["state"] == "BUDGET_SPENT" and "max_preemptions=1" in status["reason"], f"{status}\n{job.dump()}"
    assert decisions(job) == [("requeue", "preemption"), ("finish", "preemption")], job.dump()
    signals: list[Any] = [(e["attempt"], e["kind"]) for e in job.events("signal")]
    assert signals == [(0, "preemption"), (1, "preemption")], job.dump()
    dropped = [e["job_id"] for e in job.events("chain-drop")]
    assert len(chain_ids(job)) == 3 and dropped == chain_ids(job)[2:], job.dump()  # the attempt-1 signal's one
    time.sleep(2)
    assert live(job) == [] and job.attempts() == 2 and final_hash(job.run_dir) is None, job.dump()
    assert TOTAL == 12


# --- a refused successor: the job requeues itself instead ------------------------------------------------------------
def test_a_refused_successor_leaves_the_requeue_and_the_run_resumes_exactly(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    # A partition in State=DRAIN refuses new jobs (the successor's sbatch) but runs a requeued one again, as a
    # QOS's MaxSubmitJobs refuses a successor where the job itself may requeue (tests/cluster/README.md).
    job = paced(cli, tmp_path, cleanup_jobs, 4, "1", *DEBUG2, "requeue.mode=chain")
    job.wait_step(0, 1)
    subprocess.run(["scontrol", "update", "PartitionName=debug2", "State=DRAIN"], check=True, timeout=30)
    try:
        cli.run("preempt", job.job_id)
        job.wait(attempt_started(job, 1), "attempt 1 in the same job, requeued", 120)
    finally:
        subprocess.run(["scontrol", "update", "PartitionName=debug2", "State=UP"], check=True, timeout=30)
    status = job.wait_terminal(timeout=180)

    assert job.events("chain-submit") == [], job.dump()  # refused at the signal and at the decision
    assert [e["job_id"] for e in job.events("attempt-start")] == [job.job_id] * 2, job.dump()
    assert decisions(job) == [("requeue", "preemption"), ("finish", None)], job.dump()
    assert job.resumed_from(1) == assert_stop_agreed(job, 0), job.dump()
    assert status["restarts"] == 1, f"{status}\n{job.dump()}"
    assert_same_training(job, reference, status)
    said = (job.run_dir / "slurm.out").read_text()
    assert f"no successor job: {job.job_id} requeues itself instead" in said, said[-3000:]
