"""A setup error is not a node failure: the same NCCL-like error on every attempt ends the run after the second.

The script raises on every rank what NCCL raised on an H200 when two ranks shared one GPU (`invalid usage`). On 0.3
every rank's error named NCCL, so all were "collateral", the attempt was "rank-crash: a peer died without a
record", charged to max_node_failures and its node excluded, until the budget was gone (6 attempts). Now: cause
`setup-error`, charged to max_failures (3 here, so the repeat rule is what ends it), no node excluded, and the
second identical failure ends the run with the words that say so. No torch training: each attempt costs torchrun's
start and, on Slurm, the requeue's hold (cred_expire + 1 s).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import Cli, events, write_spec

SCRIPT = """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()  # every rank is up: what fails next is no peer's death
raise dist.DistBackendError(
    "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, invalid usage (run with NCCL_DEBUG=WARN"
    " for details), NCCL version 2.28.9\\nncclInvalidUsage: This usually reflects invalid usage of NCCL library.\\n"
    "Last error:\\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"
)
"""


def setup_error_spec(tmp_path: Path, backend: str, **fields: object) -> Path:
    script = tmp_path / "code" / "nccl_misuse.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRIPT)
    return write_spec(
        tmp_path / "nccl-misuse.yaml",
        name="nccl-misuse",
        script=str(script),
        nodes=2,
        nproc_per_node=2,
        gpus_per_node=0,
        run_dir=str(tmp_path / "runs"),
        backend=backend,
        env={"OMP_NUM_THREADS": "1"},
        requeue={"max_failures": 3},
        **fields,
    )


def check_the_run(cli: Cli, job_id: str, run_dir: Path) -> None:
    status = cli.wait_terminal(job_id, timeout=240)
    decisions = [e for e in events(run_dir) if e["event"] == "decision"]
    trail = [(d["action"], d.get("kind"), d.get("cause"), d.get("reason")) for d in decisions]
    assert (status["state"], status["restarts"]) == ("FAILED", 1), trail
    assert [(d["action"], d["kind"], d["cause"]) for d in decisions] == [
        ("requeue", "failure", "setup-error"),
        ("finish", "failure", "setup-error"),
    ], trail
    assert "invalid usage" in decisions[0]["cause_why"], trail
    assert decisions[1]["reason"].startswith("the same error on attempts 0 and 1 ("), trail
    assert decisions[1]["reason"].endswith("this looks like a setup problem, not a node; not retried"), trail
    assert not [e for e in events(run_dir) if e["event"] == "node-excluded"], "a setup error excluded a node"
    told = cli.run("status", job_id).stdout
    assert "a peer died without a record" not in told and "node_failure" not in told, told
    assert "this looks like a setup problem, not a node" in told, told


@pytest.mark.torchrun
def test_the_same_setup_error_twice_ends_the_run_on_the_local_backend(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    job_id, run_dir = cli.submit(setup_error_spec(tmp_path, "local"))
    check_the_run(cli, job_id, run_dir)


@pytest.mark.slurm
@pytest.mark.one_slurm_version  # the decision is the batch shell's; the requeue itself runs in the preemption tests
def test_the_same_setup_error_twice_ends_the_run_on_slurm(tmp_path: Path, cleanup_jobs: Callable[[str], str]) -> None:
    cli = Cli(tmp_path / "home")
    job_id, run_dir = cli.submit(setup_error_spec(tmp_path, "sbatch", partition="debug"))
    cleanup_jobs(job_id)
    check_the_run(cli, job_id, run_dir)
