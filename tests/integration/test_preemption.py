"""Preemption, time limits, budgets and crashes of the example job on the real local Slurm cluster.

Every test drives the real CLI (`ddpctl submit/preempt/status/logs`) against the 2-node cluster with the example
trainer as 2 nodes x 2 ranks (gloo), 12 optimizer steps. Training is deterministic, so every run that completes
must end with the weights of the uninterrupted reference run, which the local backend computes once for the
module while the first cluster test runs; test_preempt_warning checks that the cluster's uninterrupted prefix
matches it step for step.

Requeue hold: Slurm holds a requeued job for cred_expire+1 s (11 s on the test cluster). The tests wait it out:
ending it early (`scontrol update starttime=now`) lets the job start while its revoked credential is still
valid on the nodes, and slurmctld then kills it as non-startable ("Job credential revoked") and marks it FAILED.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from clitools import REPO, TERMINAL, Cli, events, final_hash
from slurmtools import cluster_dump, job_info, sbatch_text
from tracktools import mlflow_steps, tensorboard_steps, tracker_env, wandb_runs

pytestmark = pytest.mark.slurm

SPEC = REPO / "jobs" / "example.yaml"
TOTAL = 12
TRAIN = ["--epochs", "2", "--steps-per-epoch", "6"]  # 12 optimizer steps, a stop in epoch 0 resumes mid-epoch
STEP_RE = re.compile(r"^\[example\] step (\d+)/(\d+) epoch \d+ loss (\S+)")
HEADER_RE = re.compile(r"^\[ddpctl\.worker\] rank=(\d+) attempt=(\d+) .*\bpid=(\d+)\b")
RESUMED_RE = re.compile(r"^\[example\] resumed from step (\d+)")
LOGS_PREFIX_RE = re.compile(r"^\[a(\d+) (\S+) r(\d+)\] ")
POLL_S = 0.25
STATUS_POLL_S = 1.0
START_TIMEOUT_S = 240  # the cluster is shared: a submission may wait for other jobs first


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def squeue_row(job_id: str) -> tuple[str, str] | None:
    """(state, reason) per squeue, None once squeue no longer lists the job."""
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T|%r"], capture_output=True, text=True, timeout=30, check=False
    )
    line = done.stdout.strip()
    if done.returncode != 0 or not line:
        return None
    state, _, reason = line.splitlines()[0].partition("|")
    return state, reason


@dataclass
class Job:
    cli: Cli
    job_id: str
    run_dir: Path
    states_seen: list[str] = field(default_factory=list)

    # --- files -----------------------------------------------------------------------------------------------
    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        found = events(self.run_dir)
        return [e for e in found if name is None or e.get("event") == name]

    def rank_log(self, attempt: int, rank: int = 0) -> str:
        return _read(self.run_dir / f"attempt-{attempt}" / f"rank-{rank}.log")

    def steps(self, attempt: int) -> list[int]:
        """Optimizer steps rank 0 logged in this attempt, in order."""
        return [int(m.group(1)) for line in self.rank_log(attempt).splitlines() if (m := STEP_RE.match(line))]

    def last_step(self, attempt: int) -> int:
        return max(self.steps(attempt), default=0)

    def losses(self) -> dict[int, str]:
        """step -> loss as rank 0 logged it, the latest attempt that computed a step winning."""
        found: dict[int, str] = {}
        for attempt in range(self.attempts()):
            for line in self.rank_log(attempt).splitlines():
                if m := STEP_RE.match(line):
                    found[int(m.group(1))] = m.group(3)
        return found

    def attempts(self) -> int:
        return len(list(self.run_dir.glob("attempt-*")))

    def worker_pid(self, attempt: int, rank: int) -> int:
        for line in self.rank_log(attempt, rank).splitlines():
            if (m := HEADER_RE.match(line)) and int(m.group(1)) == rank and int(m.group(2)) == attempt:
                return int(m.group(3))
        raise AssertionError(f"no worker header for rank {rank} in attempt {attempt}\n{self.dump()}")

    def resumed_from(self, attempt: int) -> int | None:
        for line in self.rank_log(attempt).splitlines():
            if m := RESUMED_RE.match(line):
                return int(m.group(1))
        return None

    def stopped(self, attempt: int) -> dict[str, Any] | None:
        path = self.run_dir / f"attempt-{attempt}" / "stopped.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data

    def decision(self, attempt: int) -> dict[str, Any] | None:
        found = [e for e in self.events("decision") if e.get("attempt") == attempt]
        return found[-1] if found else None

    # --- waiting ---------------------------------------------------------------------------------------------
    def note_state(self) -> str | None:
        row = squeue_row(self.job_id)
        state = row[0] if row else None
        if state and (not self.states_seen or self.states_seen[-1] != state):
            self.states_seen.append(state)
        return state

    def wait(self, predicate: Callable[[], object], what: str, timeout: float = 90, poll_s: float = POLL_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.note_state()
            if predicate():
                return
            time.sleep(poll_s)
        raise AssertionError(f"job {self.job_id}: timed out after {timeout} s waiting for {what}\n{self.dump()}")

    def wait_step(self, attempt: int, step: int, timeout: float = START_TIMEOUT_S) -> int:
        """Wait until rank 0 of `attempt` logged `step` or later; return the last logged step."""
        self.wait(lambda: self.last_step(attempt) >= step, f"attempt {attempt} to reach step {step}", timeout)
        return self.last_step(attempt)

    def wait_requeued(
        self, attempt: int, in_hold: Callable[[], None] | None = None, timeout: float = 90
    ) -> dict[str, Any]:
        """Wait for attempt's requeue decision and for Slurm's requeue; run `in_hold` while it is PENDING."""
        self.wait(lambda: self.decision(attempt) is not None, f"the decision of attempt {attempt}", timeout)
        decision = self.decision(attempt)
        assert decision is not None and decision["action"] == "requeue", f"not requeued: {decision}\n{self.dump()}"
        self.wait(
            lambda: (squeue_row(self.job_id) or ("",))[0] == "PENDING" or self.attempts() > attempt + 1,
            f"job PENDING again after attempt {attempt}",
            60,
        )
        if in_hold is not None:
            in_hold()
        return decision

    def wait_terminal(self, timeout: float = 300) -> dict[str, Any]:
        status: dict[str, Any] = {}

        def done() -> bool:
            nonlocal status
            status = self.cli.status(self.job_id)
            return status["state"] in TERMINAL

        # `ddpctl status` costs ~0.3 s of CPU a call, taken from the job's ranks on CI's 2 cores: poll it slowly.
        self.wait(done, "a terminal state", timeout, poll_s=STATUS_POLL_S)
        return status

    # --- diagnostics -----------------------------------------------------------------------------------------
    def dump(self) -> str:
        parts = [f"=== job {self.job_id}, run dir {self.run_dir}, states seen {self.states_seen}", "--- events.jsonl"]
        parts += [json.dumps({k: v for k, v in e.items() if k not in ("argv", "dist")}) for e in self.events()]
        parts += ["--- slurm.out (tail)", _tail(_read(self.run_dir / "slurm.out"), 40)]
        for attempt in range(self.attempts()):
            parts += [f"--- attempt-{attempt}/rank-0.log (tail)", _tail(self.rank_log(attempt), 15)]
        parts.append(cluster_dump(self.job_id))
        return "\n".join(parts)


def submit(
    cli: Cli,
    runs: Path,
    cleanup: Callable[[str], str],
    *train_args: str,
    sets: tuple[str, ...] = (),
    backend: str | None = None,
) -> Job:
    options = ["--set", f"run_dir={runs}", "--set", f"args={json.dumps([*TRAIN, *train_args])}"]
    for item in sets:
        options += ["--set", item]
    if backend:
        options += ["--backend", backend]
    job_id, run_dir = cli.submit(SPEC, *options)
    if backend != "local":
        cleanup(job_id)
    return Job(cli, job_id, run_dir)


def paced(cli: Cli, tmp_path: Path, cleanup: Callable[[str], str], every: int, sleep: str, *sets: str) -> Job:
    """The example job under <tmp_path>/runs: a checkpoint every `every` steps of `sleep` s each, `sets` applied."""
    return submit(cli, tmp_path / "runs", cleanup, "--ckpt-every", str(every), "--sleep-per-step", sleep, sets=sets)


@dataclass
class Reference:
    """The uninterrupted run on the local backend; started once, read when first needed."""

    job: Job
    _status: dict[str, Any] | None = None

    def finished(self) -> Job:
        if self._status is None:
            self._status = self.job.cli.wait_terminal(self.job.job_id, timeout=300)
        assert self._status["state"] == "COMPLETED", f"reference run failed: {self._status}\n{self.job.dump()}"
        return self.job

    @property
    def hash(self) -> str:
        found = final_hash(self.finished().run_dir)
        assert found, f"the reference run printed no final-weights-sha256\n{self.job.dump()}"
        return found

    @property
    def losses(self) -> dict[int, str]:
        return self.finished().losses()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home")


def assert_same_training(job: Job, reference: Reference, status: dict[str, Any]) -> None:
    """Completed with the reference weights; every step's logged loss equals the reference's."""
    assert status["state"] == "COMPLETED", f"{status}\n{job.dump()}"
    got = final_hash(job.run_dir)
    assert got == reference.hash, f"final weights differ from the uninterrupted run\n{job.dump()}"
    losses = job.losses()
    assert sorted(losses) == list(range(1, TOTAL + 1)), f"steps logged: {sorted(losses)}\n{job.dump()}"
    diverged = [s for s in losses if losses[s] != reference.losses.get(s)]
    assert not diverged, f"losses differ from the reference at steps {diverged}\n{job.dump()}"


def decisions(job: Job) -> list[tuple[str, str | None]]:
    return [(d["action"], d.get("kind")) for d in job.events("decision")]


def assert_checkpoints_load(job: Job) -> list[int]:
    """Every checkpoint directory with a completion marker matches its file table and loads; returns steps."""
    import torch

    from ddpctl.runtime import ckptio

    complete = []
    for path in sorted((job.run_dir / "checkpoints").glob("step-*")):
        marker = ckptio.read_table(path / "COMPLETE")
        if marker is None:
            continue
        for name, expected in marker["files"].items():
            problem = ckptio.file_matches(path / name, expected, check_hash=True)
            assert problem is None, f"{path}: {problem}\n{job.dump()}"
            torch.load(path / name, map_location="cpu", weights_only=True)
        assert set(marker["files"]) == {"shared.pt", *(f"rank-{r}.pt" for r in range(4))}, marker
        complete.append(int(marker["step"]))
    return complete


def assert_stop_agreed(job: Job, attempt: int) -> int:
    """All 4 ranks logged the same agreed stop step, which is the stop event's and the marker's step."""
    marker = job.stopped(attempt)
    assert marker is not None, f"no stopped.json for attempt {attempt}\n{job.dump()}"
    step = int(marker["step"])
    stops = [e for e in job.events("stop") if e.get("attempt") == attempt]
    assert [e["step"] for e in stops] == [step], f"stop events {stops}\n{job.dump()}"
    for rank in range(4):
        agreed = re.findall(r"rank \d+ stop agreed at step (\d+)", job.rank_log(attempt, rank))
        assert agreed == [str(step)], f"rank {rank} agreed on {agreed}, stop step {step}\n{job.dump()}"
    assert job.last_step(attempt) == step, f"rank 0 went past the stop step {step}\n{job.dump()}"
    return step


class LogFollower:
    """`ddpctl logs -f JOB --no-color` as a subprocess, its stdout read to the end on a thread."""

    def __init__(self, cli: Cli, job_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ddpctl", "logs", "-f", job_id, "--no-color"],
            cwd=cli.cwd,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.err = ""
        self._threads = [
            threading.Thread(target=self._out, daemon=True),
            threading.Thread(target=self._err, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _err(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def finish(self, timeout: float = 30) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"logs -f still running {timeout} s after the job ended; last lines:\n" + "\n".join(self.lines[-20:])
            ) from None
        for thread in self._threads:
            thread.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# --- 1. the warning signal through `ddpctl preempt` -----------------------------------------------------------------
def test_preempt_warning_stops_all_ranks_at_one_step_and_resumes_exactly(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    # The NCCL-shaped lane (`--backend cuda:gloo`: the default group refuses CPU tensors as NCCL does; the example
    # reduces its gradients on a Gloo group): ddpctl's own collectives must all go over its control group.
    job = submit(
        cli, tmp_path / "runs", cleanup_jobs, "--ckpt-every", "4", "--sleep-per-step", "0.5", "--backend", "cuda:gloo"
    )
    follower = LogFollower(cli, job.job_id)
    try:
        job.wait_step(0, 3)
        cli.run("preempt", job.job_id)
        decision = job.wait_requeued(0)
        status = job.wait_terminal()
        code = follower.finish()
    finally:
        follower.kill()

    step = assert_stop_agreed(job, 0)
    assert 3 <= step < TOTAL, f"stop step {step}\n{job.dump()}"
    signals = job.events("signal")
    assert [(e["attempt"], e["kind"]) for e in signals] == [(0, "preemption")], f"{signals}\n{job.dump()}"
    assert (decision["kind"], decision["reason"]) == ("preemption", "preemption: requeue 1 of 10"), decision
    assert decisions(job) == [("requeue", "preemption"), ("finish", None)], job.dump()
    # Requeued under the same job id, one restart, and resumed at the stop step.
    assert [e["job_id"] for e in job.events("attempt-start")] == [job.job_id, job.job_id], job.dump()
    assert status["restarts"] == 1, f"{status}\n{job.dump()}"
    assert job_info(job.job_id).get("Restarts") == "1", job_info(job.job_id)
    assert job.resumed_from(1) == step, job.dump()
    # No step computed twice: the attempts' steps are disjoint and together are all of them.
    first, second = job.steps(0), job.steps(1)
    assert first == list(range(1, step + 1)) and second == list(range(step + 1, TOTAL + 1)), job.dump()
    # The cluster's uninterrupted prefix equals the local reference step for step (same losses), and so do the
    # resumed steps and the final weights.
    assert_same_training(job, reference, status)

    assert code == 0, f"logs -f exited {code}: {follower.err}"
    seen = {(int(m.group(1)), int(m.group(3))) for line in follower.lines if (m := LOGS_PREFIX_RE.match(line))}
    assert {(a, r) for a in (0, 1) for r in range(4)} <= seen, f"logs -f showed {sorted(seen)}\n{follower.err}"
    text = "\n".join(follower.lines)
    assert f"rank 3 stop agreed at step {step}" in text and f"resumed from step {step}" in text, text[-3000:]
    assert follower.lines and follower.lines[-1] == f"-- job {job.job_id} COMPLETED --", follower.lines[-10:]
    told = cli.run("status", job.job_id).stdout
    assert "NOT ACKNOWLEDGED" not in told and "script-error" not in told, told


# --- 2. real preemption by a job on the `urgent` partition, three times -----------------------------------------
# On the second pair (debug2, preempted by urgent2): three grace periods and requeues are mostly waiting on Slurm,
# so it runs beside the first pair's lane rather than lengthening it (tests/cluster/README.md).
# One version in CI: three rounds of the same path; a real preemption by the urgent partition runs on 24.11 in
# test_a_run_failing_after_a_real_preemption_ends_failed_in_slurm_too and the plain script's (test_plain_scripts).
@pytest.mark.second_pair
@pytest.mark.one_slurm_version
def test_three_real_preemptions_by_the_urgent_partition(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    # With every tracker on (tracking): the preempted run must stay one tracker run with each step once.
    trackers = [f"env.{name}={value}" for name, value in tracker_env(tmp_path / "mlruns").items()]
    sets = ("partition=debug2", "tracking=[wandb, mlflow, tensorboard]", *trackers)
    # Slurm's preemption signal came ~10 s after the urgent job's sbatch under CI's load, and the third attempt
    # starts near the end (step 9 of 12): from step 7 on each step takes 5 s, so its last stop lands mid-run (a
    # CI run saw the third signal arrive in the last step: the run completed instead of being preempted).
    job = submit(
        cli, tmp_path / "runs", cleanup_jobs, "--ckpt-every", "4", "--sleep-per-step", "0.5",
        "--late-from-step", "7", "--late-sleep", "5", sets=sets,
    )  # fmt: skip
    stops: list[int] = []
    for attempt in range(3):
        # RUNNING and made progress in this attempt: at least one new step since it (re)started.
        job.wait_step(attempt, stops[-1] + 1 if stops else 1)
        cleanup_jobs(sbatch_text("sleep 1", "-p", "urgent2", "-N2", "-J", "ddpctl-test-urgent"))
        decision = job.wait_requeued(attempt)
        assert decision["kind"] == "preemption", f"{decision}\n{job.dump()}"
        stops.append(assert_stop_agreed(job, attempt))
    status = job.wait_terminal()

    assert stops == sorted(set(stops)) and stops[-1] < TOTAL, f"stop steps {stops}\n{job.dump()}"
    assert [e["kind"] for e in job.events("signal")] == ["preemption"] * 3, job.dump()
    assert decisions(job) == [("requeue", "preemption")] * 3 + [("finish", None)], job.dump()
    assert status["restarts"] == 3, f"{status}\n{job.dump()}"
    assert [job.resumed_from(a) for a in (1, 2, 3)] == stops, job.dump()
    assert [job.steps(a)[0] for a in (1, 2, 3)] == [s + 1 for s in stops], job.dump()
    assert_same_training(job, reference, status)  # the trackers changed nothing in the training
    every = list(range(1, TOTAL + 1))
    assert mlflow_steps(job.run_dir) == (1, "FINISHED", every)
    assert tensorboard_steps(job.run_dir) == every
    offline = wandb_runs(job.run_dir)
    assert {run_id for run_id, _ in offline} == {json.loads((job.run_dir / "tracking.json").read_text())["wandb"]["id"]}
    assert len(offline) == 4 and [step for _, steps in offline for step in steps] == every


# --- 2b. a run that fails after a real preemption: Slurm's own record says FAILED too -----------------------------
SLURM_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


def slurm_final(job: Job, settle_s: float = 4.0, timeout: float = 120) -> dict[str, str]:
    """Slurm's own record of the job once it has ended for good: a state Slurm does not requeue from, held for
    `settle_s` (Slurm >= 24.05 may requeue a job once more after its batch script ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = job_info(job.job_id)
        if info.get("JobState") in SLURM_ENDED:
            time.sleep(settle_s)
            again = job_info(job.job_id)
            if again.get("JobState") == info["JobState"] and again.get("Restarts") == info.get("Restarts"):
                return again
        time.sleep(POLL_S)
    raise AssertionError(f"job {job.job_id} never ended in Slurm: {job_info(job.job_id)}\n{job.dump()}")


@pytest.mark.second_pair  # beside the first pair's lane, as the three preemptions above
def test_a_run_failing_after_a_real_preemption_ends_failed_in_slurm_too(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    """Slurm >= 24.05 requeues such a job once more after its failure (tests/cluster/README.md): that start
    must not train, and must not end the job COMPLETED in Slurm's record (sacct, scontrol) either."""
    # A killed rank is an infrastructure failure (issue 26): with no budget for those, it ends the run.
    job = paced(cli, tmp_path, cleanup_jobs, 2, "0.5", "requeue.max_node_failures=0", "partition=debug2")
    job.wait_step(0, 1)
    cleanup_jobs(sbatch_text("sleep 1", "-p", "urgent2", "-N2", "-J", "ddpctl-test-urgent"))
    assert job.wait_requeued(0)["kind"] == "preemption", job.dump()
    job.wait_step(1, assert_stop_agreed(job, 0) + 1)
    os.kill(job.worker_pid(1, 3), signal.SIGKILL)
    status = job.wait_terminal(timeout=120)
    slurm = slurm_final(job)

    assert (status["state"], status["restarts"]) == ("FAILED", 1), f"{status}\n{job.dump()}"
    assert decisions(job) == [("requeue", "preemption"), ("finish", "node_failure")], job.dump()
    assert (slurm.get("JobState"), slurm.get("ExitCode")) == ("FAILED", "1:0"), f"{slurm}\n{job.dump()}"
    assert job.attempts() == 2, job.dump()  # a start after the failure (24.11) trained nothing


# --- 3. the preemption budget ends the job ------------------------------------------------------------------------
@pytest.mark.one_slurm_version  # ddpctl's budget; real preemptions run on 24.11 (test_a_run_failing_after_...)
def test_preemption_budget_ends_the_job(cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]) -> None:
    # From step 6 on each step takes 3 s: the second stop lands mid-run (a CI rehearsal under load saw attempt 1
    # resume at step 7 and finish its last five 0.5 s steps before the second preempt's stop was agreed).
    job = submit(
        cli, tmp_path / "runs", cleanup_jobs, "--ckpt-every", "4", "--sleep-per-step", "0.5",
        "--late-from-step", "6", "--late-sleep", "3", sets=("requeue.max_preemptions=1",),
    )  # fmt: skip
    job.wait_step(0, 1)
    cli.run("preempt", job.job_id)
    first = job.wait_requeued(0)
    assert first["kind"] == "preemption", first
    job.wait_step(1, assert_stop_agreed(job, 0) + 1)
    cli.run("preempt", job.job_id)
    status = job.wait_terminal(timeout=120)

    assert_stop_agreed(job, 1)
    assert status["state"] == "BUDGET_SPENT", f"{status}\n{job.dump()}"
    assert "budget" in status["reason"] and "max_preemptions=1" in status["reason"], status
    last = job.decision(1)
    assert last is not None and (last["action"], last["kind"]) == ("finish", "preemption"), job.dump()
    assert last["reason"] == "preemption budget spent: 1 of max_preemptions=1 requeues used", last
    assert decisions(job) == [("requeue", "preemption"), ("finish", "preemption")], job.dump()
    # Not requeued again: it left the queue and has no third attempt.
    time.sleep(2)
    assert squeue_row(job.job_id) is None and job.attempts() == 2, job.dump()
    assert final_hash(job.run_dir) is None
    human = cli.run("status", job.job_id).stdout
    assert "BUDGET_SPENT" in human and "max_preemptions=1" in human, human


# --- 4. kill -9 of one worker (issue 26: the "one rank SIGKILLed" row) ----------------------------------------------
@pytest.mark.one_slurm_version  # the launchers' blame and the budgets; the requeue runs on 24.11 in the other tests
def test_a_killed_rank_costs_a_requeue_with_default_budgets(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    """The example's default budgets (max_failures: 0): a rank killed by SIGKILL is charged to
    max_node_failures, the run resumes from its newest complete checkpoint and ends with the uninterrupted run's
    weights; status and logs --errors name the kill of that rank, not the surviving ranks' Gloo errors."""
    job = paced(cli, tmp_path, cleanup_jobs, 2, "0.5")
    job.wait_step(0, 5)  # checkpoints at steps 2 and 4 are complete
    os.kill(job.worker_pid(0, 1), signal.SIGKILL)  # a rank on the first node
    killed_at = job.last_step(0)

    job.wait(lambda: job.decision(0) is not None, "the decision after the kill", 90)
    assert not job.stopped(0), f"a killed worker must not look like an agreed stop\n{job.dump()}"
    complete = assert_checkpoints_load(job)  # nothing half-written is marked complete
    assert complete and max(complete) >= 4, f"complete checkpoints {complete}\n{job.dump()}"
    decision = job.decision(0)
    assert decision is not None
    assert (decision["action"], decision["kind"]) == ("requeue", "node_failure"), job.dump()
    assert decision["reason"] == "node_failure (rank-crash): requeue 1 of 5", decision
    assert (decision["cause"], decision["cause_rank"], decision["cause_why"]) == (
        "rank-crash",
        1,
        "killed by SIGKILL",
    ), decision
    job.wait_requeued(0)
    status = job.wait_terminal()
    resumed = job.resumed_from(1)
    assert resumed == max(complete) and resumed <= killed_at, f"resumed {resumed}, killed at {killed_at}"
    assert job.steps(1)[0] == resumed + 1, job.dump()
    assert decisions(job) == [("requeue", "node_failure"), ("finish", None)], job.dump()
    assert status["restarts"] == 1, status
    assert_same_training(job, reference, status)
    node = decision["cause_node"]
    said = f"attempt 0 ended by rank-crash: rank 1 on {node}: killed by SIGKILL"
    assert said in cli.run("status", job.job_id).stdout, job.dump()
    errors = cli.run("logs", job.job_id, "--errors", "--attempt", "0", "--no-color").stdout
    assert f"-- {said}" in errors, errors
    # health.preflight: auto: no check on the first start; after the infrastructure failure both nodes checked
    # themselves (and passed) before attempt 1's torchrun, and status says what that cost.
    checks = [(e["attempt"], e["ok"], e["peers_ok"]) for e in job.events("preflight")]
    assert checks == [(1, True, True), (1, True, True)], job.dump()
    assert "preflight check, attempt 1: 2 node(s) passed in" in cli.run("status", job.job_id).stdout


@pytest.mark.one_slurm_version  # torchrun's own restart inside the step: CI runs it on 22.05 only
def test_max_restarts_restarts_a_killed_rank_inside_the_allocation(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    """torchrun's own restart (max_restarts, c10d): the killed rank's worker group restarts in the allocation
    from the newest complete checkpoint, no requeue, and the run ends with the uninterrupted run's weights. Each
    round's workers get a fresh store: before, every restarted rank died in init ("Gloo connectFullMesh failed
    ... Connection refused") reading the previous round's addresses from the shared one."""
    job = paced(cli, tmp_path, cleanup_jobs, 2, "0.5", "max_restarts=2")
    job.wait_step(0, 5)  # checkpoints at steps 2 and 4 are complete
    os.kill(job.worker_pid(0, 1), signal.SIGKILL)
    status = job.wait_terminal()

    assert decisions(job) == [("finish", None)], job.dump()
    assert (status["restarts"], job.attempts()) == (0, 1), f"{status}\n{job.dump()}"
    resumed = [e["step"] for e in job.events("resume") if e["attempt"] == 0]
    assert resumed[0] is None and len(resumed) == 2 and resumed[1] >= 4, f"resumes {resumed}\n{job.dump()}"
    assert "connectFullMesh" not in job.rank_log(0, 0), job.dump()
    assert_same_training(job, reference, status)


# --- 5. a damaged newest checkpoint between attempts --------------------------------------------------------------
@pytest.mark.one_slurm_version  # the checkpoint reader's choice; no Slurm call
def test_damaged_newest_checkpoint_resumes_from_the_previous_one(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    job = paced(cli, tmp_path, cleanup_jobs, 2, "0.5")
    job.wait_step(0, 5)
    cli.run("preempt", job.job_id)
    damaged: dict[str, Any] = {}

    def damage() -> None:
        # In the requeue hold: no process of the job runs; overwrite bytes in the middle of the newest
        # checkpoint's shared file (same size, so only the checksum can tell).
        assert squeue_row(job.job_id) == ("PENDING", "BeginTime"), f"{squeue_row(job.job_id)}\n{job.dump()}"
        steps = assert_checkpoints_load(job)
        newest = job.run_dir / "checkpoints" / f"step-{max(steps):09d}" / "shared.pt"
        data = bytearray(newest.read_bytes())
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(64)
        newest.write_bytes(bytes(data))
        damaged.update(step=max(steps), previous=max(s for s in steps if s < max(steps)))

    job.wait_requeued(0, in_hold=damage)
    stop = assert_stop_agreed(job, 0)
    assert damaged["step"] == stop, f"the newest checkpoint is not the stop checkpoint: {damaged}, {stop}"
    status = job.wait_terminal()

    assert job.resumed_from(1) == damaged["previous"], f"{damaged}\n{job.dump()}"
    warning = f"WARNING: skipping checkpoint {job.run_dir / 'checkpoints' / f'step-{stop:09d}'}"
    assert warning in job.rank_log(1), job.dump()
    skipped = job.events("checkpoint_skipped")
    assert [e["step"] for e in skipped] == [stop] and "CRC-32" in skipped[0]["reason"], job.dump()
    assert job.steps(1)[0] == damaged["previous"] + 1, job.dump()  # steps after it are computed again
    assert decisions(job) == [("requeue", "preemption"), ("finish", None)], job.dump()
    assert_same_training(job, reference, status)


# --- 6. a real time limit, on the second pair (tests/cluster/README.md: it waits, beside the others) -----------------
@pytest.mark.second_pair
def test_time_limit_warning_checkpoints_and_requeues_before_the_kill(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference
) -> None:
    # 12 steps x 11 s: uninterrupted it would need more than its 2 minutes.
    sleep = 11.0
    job = paced(cli, tmp_path, cleanup_jobs, 4, str(sleep), "time=00:02:00", "requeue.lead_s=60", "partition=debug2")
    assert TOTAL * sleep > 120

    def drop_sleep() -> None:
        # Only the first attempt has to meet the time limit: the requeued one trains at full speed (the sleep
        # changes no weights) with 5 minutes, so no second warning comes even where a loaded machine (the second
        # pair's lane runs beside the others) makes its ranks start slowly.
        extend = ["scontrol", "update", f"JobId={job.job_id}", "TimeLimit=00:05:00"]
        subprocess.run(extend, check=True, capture_output=True, timeout=30)
        spec_file = job.run_dir / "job.yaml"
        spec = yaml.safe_load(spec_file.read_text())
        cut = spec["args"].index("--sleep-per-step")
        spec["args"] = spec["args"][:cut] + spec["args"][cut + 2 :]
        tmp = spec_file.with_name(".job.yaml.test")
        tmp.write_text(yaml.safe_dump(spec, sort_keys=False))
        tmp.replace(spec_file)

    job.wait_step(0, 1)
    decision = job.wait_requeued(0, in_hold=drop_sleep, timeout=150)
    status = job.wait_terminal()

    assert "TIMEOUT" not in job.states_seen and status["state"] != "TIMEOUT", f"{job.states_seen}\n{job.dump()}"
    warned = job.events("signal")
    assert [(e["attempt"], e["kind"]) for e in warned] == [(0, "timeout")], job.dump()
    # lead_s before the limit, but Slurm checks limits every 30 s: it may come early (ddpctl allows 45 s).
    left = warned[0]["time_left_s"]
    assert left is not None and left <= 60 + 45, warned
    assert (decision["kind"], decision["reason"]) == ("timeout", "timeout: requeue 1 of 3"), decision
    started = job.events("attempt-start")[0]["t"]
    stop = [e for e in job.events("stop") if e["attempt"] == 0]
    assert stop and stop[0]["t"] - started < 120 and decision["t"] - started < 120, job.dump()
    step = assert_stop_agreed(job, 0)
    assert 0 < step < TOTAL and job.resumed_from(1) == step, job.dump()
    assert decisions(job) == [("requeue", "timeout"), ("finish", None)], job.dump()
    assert status["restarts"] == 1 and job_info(job.job_id).get("JobState") == "COMPLETED", job.dump()
    assert_same_training(job, reference, status)
