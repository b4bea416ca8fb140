"""`ddpctl doctor`: each verdict from literal facts (the cluster's from real 22.05 scontrol lines), and the real
command on this machine."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from scontrol_output import CONFIG_22_05, NODE_22_05, PARTITION_24_11

from ddpctl.plan.doctor import FAIL, OK, WARN, Facts, evaluate
from ddpctl.plan.torchprobe import TorchFacts
from ddpctl.slurm import cluster
from ddpctl.spec import JobSpec

ALL_TOOLS = dict.fromkeys(("sbatch", "srun", "squeue", "scontrol", "scancel"), True)
DEBUG = "PartitionName=debug Default=YES GraceTime=10 MaxTime=01:00:00 PreemptMode=REQUEUE State=UP TotalNodes=4\n"
CLUSTER = cluster.parse(CONFIG_22_05, DEBUG, NODE_22_05)
GOOD = Facts(
    tools=ALL_TOOLS,
    cluster=CLUSTER,
    torch=TorchFacts("/env/bin/python", version="2.13.0"),
    cores=64,
    backend_module=True,
    hostname="login1",
    host_address="10.0.0.5",
    ifname="eth0",
)
SPEC = JobSpec(name="x", script="t.py", nodes=2, time="00:30:00", partition="debug")


def verdicts(spec: JobSpec, facts: Facts) -> dict[str, str]:
    return {check.name: check.status for check in evaluate(spec, facts)}


def test_all_good() -> None:
    assert set(verdicts(SPEC, GOOD).values()) == {OK}


@pytest.mark.parametrize(
    ("spec", "facts", "name", "status", "fragment"),
    [
        (SPEC, replace(GOOD, tools={**ALL_TOOLS, "sbatch": False}), "slurm tools", FAIL, "--backend local"),
        (replace(SPEC, backend="local"), replace(GOOD, tools={}), "slurm tools", OK, "local backend: not needed"),
        (SPEC, replace(GOOD, cluster=replace(CLUSTER, partitions=())), "partition", FAIL, "not found"),
        (SPEC, replace(GOOD, cluster=None), "partition", FAIL, "not found"),
        (replace(SPEC, partition="gone"), GOOD, "partition", FAIL, "'gone' not found"),
        (replace(SPEC, partition=None), GOOD, "partition", OK, "debug: 4 nodes"),
        (replace(SPEC, nodes=40), replace(GOOD, cluster=cluster.parse("", PARTITION_24_11)), "partition", OK, "49"),
        (replace(SPEC, nodes=5), GOOD, "partition", FAIL, "has 4 nodes"),
        (replace(SPEC, time="02:00:00"), GOOD, "partition", FAIL, "exceeds"),
        (
            replace(SPEC, time="02:00:00"),
            replace(GOOD, cluster=cluster.parse(CONFIG_22_05, DEBUG.replace("01:00:00", "UNLIMITED"))),
            "partition",
            OK,
            "time limit none",
        ),
        (SPEC, replace(GOOD, torch=TorchFacts("/env/bin/python", error="ModuleNotFoundError")), "torch", FAIL, "not"),
        (replace(SPEC, backend="submitit"), replace(GOOD, backend_module=False), "backend", FAIL, "pip install"),
        (SPEC, replace(GOOD, host_address="127.0.1.1"), "network", WARN, "will use eth0"),
        (SPEC, replace(GOOD, host_address="127.0.1.1", ifname=None), "network", FAIL, "socket_ifname"),
        (replace(SPEC, requeue=replace(SPEC.requeue, lead_s=20)), GOOD, "requeue", WARN, "30 s late"),
        (replace(SPEC, requeue=replace(SPEC.requeue, enabled=False)), GOOD, "requeue", WARN, "disabled"),
        (SPEC, replace(GOOD, script_syntax_error="line 3: syntax error"), "batch script", FAIL, "line 3"),
        (SPEC, replace(GOOD, run_dir_writable=False), "run dir", FAIL, "not writable"),
        (SPEC, replace(GOOD, stop_handling="t.py: shows no sign"), "stop handling", WARN, "no sign"),
        (SPEC, replace(GOOD, relative_checkpoints="t.py names 'ckpt.pt'"), "checkpoint place", WARN, "ckpt.pt"),
    ],
)
def test_verdicts(spec: JobSpec, facts: Facts, name: str, status: str, fragment: str) -> None:
    found = {check.name: check for check in evaluate(spec, facts)}
    assert found[name].status == status and fragment in found[name].detail


def test_the_cluster_lines_follow_the_checks() -> None:
    names = [check.name for check in evaluate(SPEC, GOOD)]
    assert names[-7:] == [
        "slurm version",
        "task plugin",
        "proctrack",
        "srun cpus",
        "job requeue",
        "partition debug (default)",
        "gres debug",
    ]
    assert "slurm version" not in [check.name for check in evaluate(SPEC, replace(GOOD, cluster=None))]


def test_doctor_command_runs_for_the_local_backend(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpctl",
            "doctor",
            "jobs/example.yaml",
            "--backend",
            "local",
            "--set",
            f"run_dir={tmp_path}",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ok  ] torch: torch" in done.stdout and "[ok  ] backend: local" in done.stdout
