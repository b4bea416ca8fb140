"""`ddpctl doctor` end to end on the local backend: what the workers' interpreter says of its torch (a probe of
that interpreter, in the job's environment), and the refusals of specs that are sure to fail.

CI has a CPU-only torch and no GPU. The CUDA path is driven by a stand-in `torch` package on the job's
PYTHONPATH (its version.py says CUDA 13.0; torch.cuda answers one GPU and NCCL 2.28.9): the probe reads and
imports it exactly as it would a real CUDA build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STANDIN = {
    "torch/__init__.py": '__version__ = "2.11.0+cu130"\nfrom torch import cuda, version\n',
    "torch/version.py": "from typing import Optional\n__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n",
    "torch/cuda/__init__.py": "from torch.cuda import nccl\n\n\ndef device_count():\n    return 1\n",
    "torch/cuda/nccl.py": "def version():\n    return (2, 28, 9)\n",
}


def doctor(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ddpctl", "doctor", "jobs/example.yaml", "--backend", "local"]
    argv += ["--set", f"run_dir={tmp_path / 'runs'}"]
    for value in sets:
        argv += ["--set", value]
    env = {**os.environ, "DDPCTL_HOME": str(tmp_path / "home")}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def standin_torch(tmp_path: Path, cuda: bool = True) -> Path:
    site = tmp_path / "site"
    for name, text in STANDIN.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text if cuda else text.replace("'13.0'", "None").replace("cu130", "cpu"))
    return site


def test_a_cpu_only_torch_refuses_a_spec_that_asks_for_gpus(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None:
        pytest.skip("this machine's torch is a CUDA build")
    done = doctor(tmp_path, "gpus_per_node=1", "nodes=1", "nproc_per_node=1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FAIL] gpus: a CPU-only torch cannot use the GPUs this spec asks for (gpus_per_node: 1;" in done.stdout
    assert f"[ok  ] torch: torch {torch.__version__} (CPU-only: no CUDA, no NCCL) in " in done.stdout


def test_a_cuda_torch_is_named_with_its_cuda_nccl_and_gpus(tmp_path: Path) -> None:
    site = standin_torch(tmp_path)
    done = doctor(tmp_path, f"env={{PYTHONPATH: {site}}}", "gpus_per_node=1", "nodes=1", "nproc_per_node=1")
    out = done.stdout
    assert "[ok  ] torch: torch 2.11.0+cu130 (CUDA 13.0, NCCL 2.28.9, 1 GPU(s) visible here) in " in out, out
    assert "[ok  ] gpus: 1 GPU(s) visible here for nproc_per_node 1" in out, out
    assert "[ok  ] network: local backend: NCCL on lo (127.0.0.1)" in out, out
    two = doctor(tmp_path, f"env={{PYTHONPATH: {site}}}", "gpus_per_node=1", "nodes=2", "nproc_per_node=1")
    assert two.returncode == 1 and "[FAIL] gpus: the local backend's 2 simulated nodes share" in two.stdout, two.stdout


def test_the_local_backend_says_gloo_for_a_cpu_spec(tmp_path: Path) -> None:
    done = doctor(tmp_path, f"env={{PYTHONPATH: {standin_torch(tmp_path, cuda=False)}}}")
    assert "[ok  ] network: local backend: Gloo on lo (127.0.0.1)" in done.stdout, done.stdout
    assert "[ok  ] slurm tools: local backend: not needed" in done.stdout, done.stdout


def test_a_tracker_missing_from_the_jobs_environment_is_refused(tmp_path: Path) -> None:
    venv = tmp_path / "venv"  # the job's own interpreter: no wandb there, whatever this one has
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = standin_torch(tmp_path, cuda=False)
    done = doctor(tmp_path, f"python={python}", f"env={{PYTHONPATH: {site}}}", "tracking=[wandb]")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"[FAIL] trackers: tracking: wandb not installed for {python}: " in done.stdout, done.stdout
    assert f"[ok  ] torch: torch 2.11.0+cpu (CPU-only: no CUDA, no NCCL) in {python}" in done.stdout, done.stdout


def test_ranks_grossly_over_this_machines_cores_are_refused(tmp_path: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    done = doctor(tmp_path, f"nodes={cores}", "nproc_per_node=9")
    line = f"[FAIL] cores: {9 * cores} rank(s) on the {cores} core(s) of this machine"
    assert done.returncode == 1 and line in done.stdout, done.stdout


def test_the_dry_run_of_a_gpu_spec_says_a_cpu_only_torch_cannot_use_them(tmp_path: Path) -> None:
    site = standin_torch(tmp_path, cuda=False)
    argv = [sys.executable, "-m", "ddpctl", "submit", "jobs/example.yaml", "--dry-run", "--backend", "local"]
    argv += ["--set", f"env={{PYTHONPATH: {site}}}", "--set", "gpus_per_node=1", "--set", "nodes=1"]
    argv += ["--set", "nproc_per_node=1", "--set", f"run_dir={tmp_path / 'runs'}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "# network: NCCL on lo (127.0.0.1)" in done.stdout, done.stdout
    assert "\ntorch:    torch 2.11.0+cpu (CPU-only: no CUDA, no NCCL) in " in done.stdout, done.stdout
    refusal = (
        "\ngpus:     refused by doctor: a CPU-only torch cannot use the GPUs this spec asks for (gpus_per_node: 1;"
    )
    assert refusal in done.stdout, done.stdout


def test_a_workers_interpreter_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    done = doctor(tmp_path, "python=no-such-python3")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FAIL] torch: not importable by no-such-python3 (command not found: 'no-such-python3'" in done.stdout
