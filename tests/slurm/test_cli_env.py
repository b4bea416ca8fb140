"""`ddpctl env`: the real CLI in a child process with a crafted environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ddpctl.slurm.env import master_port

STEP = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "rack[1-2]-node[01-02]",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_NODEID": "1",
    "SLURM_STEP_ID": "0",
    "SLURMD_NODENAME": "rack1-node02",
    "SLURM_RESTART_COUNT": "2",
}


def ddpctl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # This process's environment minus anything Slurm or ddpctl set: CI may itself run under Slurm.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_", "DDPCTL_"))}
    return subprocess.run(
        [sys.executable, *args], env={**base, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def env_json(env: dict[str, str], *flags: str) -> dict[str, object]:
    done = ddpctl("-m", "ddpctl", "env", "--json", *flags, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_json() -> None:
    assert env_json(STEP) == {
        "MASTER_ADDR": "rack1-node01",
        "MASTER_PORT": master_port("4242", None, 2),
        "NODE_RANK": 1,
        "NNODES": 4,
        "NPROC_PER_NODE": 1,
        "WORLD_SIZE": 4,
        "RESTART_COUNT": 2,
        "RDZV_ID": "4242.2",
        "JOB_ID": "4242",
        "NODE_NAME": "rack1-node02",
        "HOSTS": ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"],
    }


def test_text_listing() -> None:
    done = ddpctl("-m", "ddpctl", "env", "--nproc-per-node", "2", env=STEP)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    port = master_port("4242", None, 2)
    assert lines[:3] == ["MASTER_ADDR=rack1-node01", f"MASTER_PORT={port}", "NODE_RANK=1"]
    assert "WORLD_SIZE=8" in lines
    assert lines[-1] == "HOSTS=rack1-node[01-02],rack2-node[01-02]"


NPROC = [
    ({}, (), 1),
    ({"SLURM_GPUS_ON_NODE": "0"}, (), 1),
    ({"SLURM_GPUS_PER_NODE": "4", "SLURM_GPUS_ON_NODE": "4"}, (), 4),  # asked per node: alike on every node
    ({"SLURM_GPUS_ON_NODE": "4", "DDPCTL_NPROC_PER_NODE": "3"}, (), 3),
    ({"SLURM_GPUS_ON_NODE": "4", "DDPCTL_NPROC_PER_NODE": "3"}, ("--nproc-per-node", "2"), 2),
]


@pytest.mark.parametrize(("extra", "flags", "nproc"), NPROC)
def test_nproc_precedence(extra: dict[str, str], flags: tuple[str, ...], nproc: int) -> None:
    result = env_json({**STEP, **extra}, *flags)
    assert result["NPROC_PER_NODE"] == nproc
    assert result["WORLD_SIZE"] == 4 * nproc


def test_resolve() -> None:
    result = env_json({**STEP, "SLURM_JOB_NODELIST": "localhost,n[2-4]"}, "--resolve")
    assert result["MASTER_ADDR"] == "127.0.0.1"
    assert result["HOSTS"] == ["localhost", "n2", "n3", "n4"]


ERRORS = [
    ({}, "ddpctl: error: not inside a Slurm job: run under sbatch/srun (or `submit --backend local`)"),
    ({"SLURM_JOB_ID": "7"}, "ddpctl: error: not inside a Slurm job step: run under srun"),
    (
        {**STEP, "SLURM_JOB_NUM_NODES": "2"},
        "ddpctl: error: SLURM_JOB_NODELIST='rack[1-2]-node[01-02]' names 4 hosts but SLURM_JOB_NUM_NODES=2",
    ),
    (  # this node's own GPU count over 4 nodes: the others may hold another number
        {**STEP, "SLURM_GPUS_ON_NODE": "4"},
        "ddpctl: error: SLURM_GPUS_ON_NODE=4 counts this node's GPUs only and the job asked for none per node "
        "(SLURM_GPUS_PER_NODE unset), so the 4 nodes may derive different WORLD_SIZEs; pass --nproc-per-node N "
        "(the same on every node), or request --gpus-per-node",
    ),
    (
        {**STEP, "DDPCTL_NPROC_PER_NODE": "many"},
        "ddpctl: error: DDPCTL_NPROC_PER_NODE='many' is not a positive integer",
    ),
]


@pytest.mark.parametrize(("env", "line"), ERRORS)
def test_errors_are_one_line_exit_2(env: dict[str, str], line: str) -> None:
    done = ddpctl("-m", "ddpctl", "env", "--json", env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == line + "\n"


def test_bad_flag_is_usage_error() -> None:
    done = ddpctl("-m", "ddpctl", "env", "--nproc-per-node", "0", env=STEP)
    assert done.returncode == 2
    assert "--nproc-per-node: expected a positive integer, got '0'" in done.stderr


def test_does_not_import_heavy_modules() -> None:
    done = ddpctl("-X", "importtime", "-m", "ddpctl", "env", "--json", env=STEP)
    assert done.returncode == 0
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert imported, "python -X importtime printed nothing"
    heavy = {name for name in imported if name.split(".")[0] in {"torch", "rich", "submitit"}}
    assert not heavy
