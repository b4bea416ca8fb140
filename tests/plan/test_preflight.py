"""submit's partition check before sbatch: literal `scontrol show partition -o` tables, and the real CLI against
the real cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ddpctl.plan.preflight import limit_s, problem
from ddpctl.slurm import cluster
from ddpctl.slurm.cluster import ClusterFacts
from ddpctl.spec import JobSpec

PARTITIONS = (
    "PartitionName=debug Default=YES MaxTime=UNLIMITED State=UP TotalNodes=2\n"
    "PartitionName=gpu Default=NO MaxTime=1-00:00:00 State=UP TotalNodes=4\n"
    "PartitionName=short Default=NO MaxTime=00:30:00 State=UP TotalNodes=2\n"
)
FACTS = cluster.parse("", PARTITIONS)
SPEC = JobSpec(name="x", script="t.py", nodes=2, time="00:10:00", source="jobs/x.yaml")


def test_partition_limits() -> None:
    assert [(p.name, p.total_nodes, limit_s(p), p.default) for p in FACTS.partitions] == [
        ("debug", 2, None, True),
        ("gpu", 4, 86400, False),
        ("short", 2, 1800, False),
    ]
    assert cluster.parse("", "garbage\n").partitions == ()
    odd = cluster.parse("", "PartitionName=x MaxTime=n/a\n").partitions[0]
    assert limit_s(odd) is None and problem(SPEC, cluster.parse("", "PartitionName=x Default=YES\n")) is None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (SPEC, None),
        (replace(SPEC, partition="gpu", nodes=4, time="1-00:00:00"), None),
        (replace(SPEC, partition="gpux"), "jobs/x.yaml: partition: got 'gpux', expected one of debug, gpu, short"),
        (replace(SPEC, nodes=3), "jobs/x.yaml: nodes: got 3, partition debug has 2 node(s)"),
        (
            replace(SPEC, partition="short", time="01:00:00"),
            "jobs/x.yaml: time: got 01:00:00, partition short allows at most 1800 s",
        ),
    ],
)
def test_problem(spec: JobSpec, says: str | None) -> None:
    got = problem(spec, FACTS)
    assert (got is None) if says is None else (got is not None and got.startswith(says)), got
    assert problem(spec, ClusterFacts()) is None  # no facts: sbatch has the last word


@pytest.mark.slurm
def test_submit_refuses_what_the_cluster_cannot_run(tmp_path: Path) -> None:
    from clitools import REPO, Cli

    cli = Cli(tmp_path / "home")
    spec = str(REPO / "jobs" / "example.yaml")
    runs = f"run_dir={tmp_path / 'runs'}"
    gpu = cli.run("submit", spec, "--set", "partition=gpu", "--set", runs, check=False)
    assert gpu.returncode == 2 and "partition: got 'gpu', expected one of debug," in gpu.stderr, gpu.stderr
    big = cli.run("submit", spec, "--set", "nodes=3", "--set", runs, check=False)
    assert big.returncode == 2 and "nodes: got 3, partition debug has 2 node(s)" in big.stderr, big.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home" / "registry.jsonl").exists()


@pytest.mark.parametrize(
    "spec",
    [
        SPEC,
        replace(SPEC, nodes=3),
        replace(SPEC, partition="short", time="01:00:00"),
        replace(SPEC, partition="short", nodes=3, time="01:00:00"),
        replace(SPEC, partition="gpu", nodes=4, time="1-00:00:00"),
        replace(SPEC, partition="gpu", time="1-00:00:01"),
    ],
)
def test_submit_and_doctor_judge_a_partitions_limits_by_one_rule(spec: JobSpec) -> None:
    """Submit refuses exactly what doctor's partition check fails, for the same limit (plan.preflight.exceeded)."""
    from ddpctl.plan.doctor import FAIL, Facts, check_partition

    refusal = problem(spec, FACTS)
    check = check_partition(spec, Facts(tools={}, cluster=FACTS))
    assert (refusal is not None) == (check.status == FAIL), (refusal, check)
    if refusal is not None:
        key = refusal.split(": ")[1]  # "nodes" or "time"
        assert ("nodes" in check.detail) == (key == "nodes") and ("time" in check.detail) == (key == "time")
