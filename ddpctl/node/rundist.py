"""This node's DistEnv for a ddpctl run: the one derivation `ddpctl launch` starts torchrun with, and that
`ddpctl env` shows when it runs inside a run (so the two can never disagree on NPROC_PER_NODE or WORLD_SIZE)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ddpctl.node.site import node_site
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import run_spec
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec


def run_node_spec(layout: RunLayout) -> JobSpec:
    """The run's spec as every attempt runs it: the code as it was at submit (the run's snapshot)."""
    from ddpctl.snapshot import pin

    return pin(run_spec(layout), layout.snapshot_file)


def run_dist(spec: JobSpec, env: Mapping[str, str], resolve_addr: Callable[[str], str] | None = None) -> DistEnv:
    """This node's DistEnv in a run of `spec`: the spec's nproc_per_node (never the node's GPU count, which
    may differ between nodes), as the node's site derives it (loopback under the local backend)."""
    return node_site(env).dist(spec, env, resolve_addr)
