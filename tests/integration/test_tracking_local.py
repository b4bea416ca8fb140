"""Tracker runs survive requeues (spec key `tracking`), on the local backend with the real libraries: the example
trainer preempted twice leaves one MLflow run, one TensorBoard axis and one W&B run id, each with every step once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import EXAMPLE_ARGS, EXAMPLE_SCRIPT, Cli, reached_step, write_spec
from tracktools import mlflow_steps, tensorboard_steps, tracker_env, wandb_runs

pytestmark = pytest.mark.torchrun

STEPS = 16  # 1 rank, 512 samples, 32 per micro-step x 2: 8 steps per epoch, 2 epochs


def test_a_run_preempted_twice_is_one_tracker_run_with_every_step_once(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    spec = write_spec(
        tmp_path / "tracked.yaml",
        name="tracked",
        script=str(EXAMPLE_SCRIPT),
        args=[*EXAMPLE_ARGS, "--samples", "512", "--sleep-per-step", "0.3"],
        run_dir=str(tmp_path / "runs"),
        backend="local",
        env={"OMP_NUM_THREADS": "1", **tracker_env(tmp_path / "mlruns")},
        tracking=["wandb", "mlflow", "tensorboard"],
        requeue={"max_preemptions": 3},
    )
    job_id, run_dir = cli.submit(spec)
    try:
        for attempt in (0, 1):  # a preemption in the middle of each of the first two attempts
            at = run_dir / f"attempt-{attempt}"
            cli.wait_for(lambda at=at, attempt=attempt: reached_step(at, 3 + 3 * attempt), timeout=180, what="steps")
            cli.run("preempt", job_id)
            cli.wait_for(lambda attempt=attempt: (run_dir / f"attempt-{attempt + 1}").is_dir(), timeout=120)
        status = cli.wait_terminal(job_id, timeout=300)
    finally:
        cli.run("cancel", job_id, check=False)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 2), status
    every = list(range(1, STEPS + 1))

    runs, state, steps = mlflow_steps(run_dir)
    assert (runs, state, steps) == (1, "FINISHED", every)
    assert tensorboard_steps(run_dir) == every

    wandb_id = json.loads((run_dir / "tracking.json").read_text())["wandb"]["id"]
    offline = wandb_runs(run_dir)
    assert [run_id for run_id, _ in offline] == [wandb_id] * 3  # one run, resumed by each attempt
    assert [step for _, run_steps in offline for step in run_steps] == every
    assert all(run_steps for _, run_steps in offline)  # each attempt logged its part
