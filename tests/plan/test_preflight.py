"""submit's partition check before sbatch: literal sinfo tables, and the real CLI against the real cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ddpctl.plan.preflight import Partition, parse_partitions, problem
from ddpctl.spec import JobSpec

SINFO = "debug*|1|infinite\ndebug*|1|infinite\ngpu|4|1-00:00:00\nshort|2|30:00\n"
SPEC = JobSpec(name="x", script="t.py", nodes=2, time="00:10:00", source="jobs/x.yaml")


def test_parse_partitions() -> None:
    assert parse_partitions(SINFO) == {
        "debug": Partition("debug", 2, None, True),
        "gpu": Partition("gpu", 4, 86400, False),
        "short": Partition("short", 2, 1800, False),
    }
    assert parse_partitions("garbage\n") == {}


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
    got = problem(spec, parse_partitions(SINFO))
    assert (got is None) if says is None else (got is not None and got.startswith(says)), got
    assert problem(spec, {}) is None  # no sinfo: sbatch has the last word


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
