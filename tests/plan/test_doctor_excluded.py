"""`ddpctl doctor`'s excluded-nodes line: the spec's own `sbatch.exclude` against its partition, and the nodes the
newest run of the name excluded (literal facts; the cluster's from a real 22.05 `scontrol show partition` line)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from scontrol_output import CONFIG_22_05

from ddpctl.plan.doctor import FAIL, OK, WARN, Facts, evaluate
from ddpctl.slurm import cluster
from ddpctl.spec import JobSpec

DEBUG = "PartitionName=debug Default=YES GraceTime=10 MaxTime=01:00:00 PreemptMode=REQUEUE State=UP TotalNodes=4\n"
FACTS = Facts(tools={}, cluster=cluster.parse(CONFIG_22_05, DEBUG))
SPEC = JobSpec(name="x", script="t.py", nodes=2, time="00:30:00", partition="debug")


@pytest.mark.parametrize(
    ("sbatch", "facts", "status", "detail"),
    [
        ((), FACTS, OK, "none; a run excludes a node that failed it"),
        ((("exclude", "n[1-2]"),), FACTS, OK, "sbatch.exclude: n1, n2;"),  # 4 - 2 = 2: still fits
        ((("exclude", "n[1-3]"),), FACTS, FAIL, "leaves debug 1 of its 4 nodes, the spec asks for 2"),
        ((("exclude", "n[1-3]"),), replace(FACTS, cluster=None), OK, "sbatch.exclude: n1, n2, n3"),  # not asked
        (
            (),
            replace(FACTS, last_run="6", last_run_excluded=("node9",)),
            WARN,
            "job 6 excluded node9 after failures there; a new submit starts without that: "
            "--set sbatch.exclude=node9 keeps them out",
        ),
        (
            (("exclude", "n1"),),
            replace(FACTS, last_run="6", last_run_excluded=("node9",)),
            WARN,
            "--set sbatch.exclude=n1,node9",
        ),
        ((("exclude", "node9"),), replace(FACTS, last_run="6", last_run_excluded=("node9",)), OK, "node9"),
    ],
)
def test_excluded_nodes(sbatch: tuple[tuple[str, str], ...], facts: Facts, status: str, detail: str) -> None:
    found = next(c for c in evaluate(replace(SPEC, sbatch=sbatch), facts) if c.name == "excluded nodes")
    assert (found.status, detail in found.detail) == (status, True), found.detail
