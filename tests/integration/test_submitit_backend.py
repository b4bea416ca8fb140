"""`ddpctl submit --backend submitit` on the real local Slurm cluster (2 nodes, own network namespaces).

The example job (2 nodes x 2 ranks) runs once uninterrupted, then once preempted mid-training with
`ddpctl preempt`: it must be requeued under the same job id, resume from the stop checkpoint and end with
the same final weights.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, final_hash
from slurmtools import job_info, scancel_and_wait

pytestmark = pytest.mark.slurm

SPEC = REPO / "jobs" / "example.yaml"
STEPS = ["--epochs", "2", "--steps-per-epoch", "6"]  # 12 optimizer steps; a stop in epoch 0 resumes mid-epoch


@dataclass(frozen=True)
class Run:
    cli: Cli
    job_id: str
    run_dir: Path


def submit(cli: Cli, runs: Path, *args: str) -> Run:
    overrides = ["--set", f"run_dir={runs}", "--set", f"args={json.dumps([*STEPS, *args])}"]
    job_id, run_dir = cli.submit(SPEC, "--backend", "submitit", *overrides)
    return Run(cli, job_id, run_dir)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: object) -> Iterator[Run]:
    """The uninterrupted run (its final hash is the reference), shared by the tests below."""
    tmp = tmp_path_factory.mktemp("submitit")
    run = submit(Cli(tmp / "home"), tmp / "runs")
    try:
        run.cli.wait_terminal(run.job_id, timeout=150)
        yield run
    finally:
        scancel_and_wait([run.job_id])


def test_example_job_completes(baseline: Run) -> None:
    status = baseline.cli.status(baseline.job_id)
    assert (status["state"], status["restarts"], status["backend"]) == ("COMPLETED", 0, "submitit"), status
    assert final_hash(baseline.run_dir), "rank 0 printed no final-weights-sha256"
    # The shared layout, plus submitit's own folder inside it.
    names = {p.name for p in baseline.run_dir.iterdir()}
    assert {"job.yaml", "events.jsonl", "slurm.out", "attempt-0", "submitit"} <= names
    assert (baseline.run_dir / "submitit" / f"{baseline.job_id}_submitted.pkl").exists()
    assert {f"rank-{r}.log" for r in range(4)} <= {p.name for p in (baseline.run_dir / "attempt-0").iterdir()}
    assert [p.name for p in baseline.run_dir.parent.iterdir()] == [baseline.job_id]  # nothing else left there
    kinds = [e["event"] for e in events(baseline.run_dir)]
    assert kinds[0] == "submit" and kinds.count("attempt-start") == 1 and kinds.count("node-exit") == 2
    decisions = [e for e in events(baseline.run_dir) if e["event"] == "decision"]
    assert [(d["action"], d["reason"]) for d in decisions] == [("finish", "training completed")]
    record = json.loads((baseline.cli.home / "registry.jsonl").read_text().splitlines()[-1])
    assert (record["backend"], record["run_dir"]) == ("submitit", str(baseline.run_dir))


def test_preempted_job_requeues_and_resumes_to_the_same_weights(baseline: Run, tmp_path: Path) -> None:
    reference = final_hash(baseline.run_dir)
    run = submit(baseline.cli, tmp_path / "runs", "--sleep-per-step", "0.5")
    try:
        rank0 = run.run_dir / "attempt-0" / "rank-0.log"
        run.cli.wait_for(lambda: rank0.exists() and "step 2/" in rank0.read_text(), timeout=90, what="step 2")
        run.cli.run("preempt", run.job_id)
        run.cli.wait_for((run.run_dir / "attempt-0" / "stopped.json").exists, timeout=30, what="the stop checkpoint")
        run.cli.wait_for(lambda: requeued_and_pending(run.job_id), timeout=30, what="the requeue")
        status = run.cli.wait_terminal(run.job_id, timeout=120)
    finally:
        scancel_and_wait([run.job_id])
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), status
    stopped = json.loads((run.run_dir / "attempt-0" / "stopped.json").read_text())
    assert 2 <= stopped["step"] < 12
    assert f"resumed from step {stopped['step']}" in (run.run_dir / "attempt-1" / "rank-0.log").read_text()
    signals = [e for e in events(run.run_dir) if e["event"] == "signal"]
    assert [(s["attempt"], s["kind"]) for s in signals] == [(0, "preemption")]
    decisions = [(e["attempt"], e["action"], e["kind"]) for e in events(run.run_dir) if e["event"] == "decision"]
    assert decisions == [(0, "requeue", "preemption"), (1, "finish", None)]
    assert final_hash(run.run_dir) == reference


def requeued_and_pending(job_id: str) -> bool:
    """True once Slurm requeued the job (same id). The begin-time hold is waited out, not cut short: starting a
    requeued job while its old credential is still revoked gets it killed as non-startable."""
    return job_info(job_id).get("Restarts", "0") != "0"


def test_rejected_submission_leaves_nothing_behind(tmp_path: Path) -> None:
    # An unknown partition is refused before submitit (preflight, exit 2); a feature no node has, by sbatch itself.
    cli = Cli(tmp_path / "home")
    base = ["submit", str(SPEC), "--backend", "submitit", "--set", f"run_dir={tmp_path / 'runs'}"]
    done = cli.run(*base, "--set", "partition=nosuch", check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "partition: got 'nosuch', expected one of debug" in done.stderr, done.stderr
    done = cli.run(*base, "--set", "sbatch.constraint=nosuchfeature", check=False)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if not line.startswith("ddpctl: warning:")]
    assert errors == [errors[0]] and "sbatch failed" in errors[0], done.stderr  # one line (the script warning aside)
    assert not (cli.home / "registry.jsonl").exists()
    runs = tmp_path / "runs" / "example"
    assert not runs.exists() or list(runs.iterdir()) == []
