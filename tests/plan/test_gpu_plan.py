"""The dry run shows which GPU each local rank uses (and a CPU job says nothing about GPUs)."""

from __future__ import annotations

from pathlib import Path

from ddpctl.plan.submission import build
from ddpctl.spec import load_spec

REPO = Path(__file__).resolve().parents[2]


def test_gpu_job_dry_run_shows_the_mapping() -> None:
    text = build(load_spec(REPO / "jobs" / "example-gpu.yaml", check_paths=False), "sbatch").text()
    assert "# GPUs: 4 per node as Slurm GRES; local rank r (0..3) uses cuda:r" in text
    assert "CUDA_VISIBLE_DEVICES=" not in text  # never set by ddpctl


def test_cpu_job_dry_run_has_no_gpu_line() -> None:
    text = build(load_spec(REPO / "jobs" / "example.yaml", check_paths=False), "sbatch").text()
    assert "# GPUs:" not in text
