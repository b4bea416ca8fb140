"""This node's DistEnv for a ddpctl run: the one derivation `ddpctl launch` starts torchrun with, and that
`ddpctl env` shows when it runs inside a run (so the two can never disagree on NPROC_PER_NODE or WORLD_SIZE)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from ddpctl.node.localenv import LOCAL_ENV_FLAG, MASTER_PORT_VAR
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import run_spec
from ddpctl.slurm.env import DistEnv, derive
from ddpctl.spec import JobSpec


def run_node_spec(layout: RunLayout) -> JobSpec:
    """The run's spec as every attempt runs it: the code as it was at submit (the run's snapshot)."""
    from ddpctl.snapshot import pin

    return pin(run_spec(layout), layout.snapshot_file)


def local_dist(dist: DistEnv, env: Mapping[str, str] | None = None) -> DistEnv:
    """Local backend: the simulated nodes' names do not resolve; everything is on loopback, on the port the
    supervisor found free for this attempt (`MASTER_PORT_VAR`; a dry run has none and shows the hashed one)."""
    port = (env or {}).get(MASTER_PORT_VAR)
    return replace(dist, master_addr="127.0.0.1", master_port=int(port) if port else dist.master_port)


def local_network(dist: DistEnv, env: Mapping[str, str] | None = None) -> tuple[DistEnv, str, str]:
    """Local backend: loopback for everything (`local_dist`), interface lo."""
    return local_dist(dist, env), "lo", "127.0.0.1"


def run_dist(spec: JobSpec, env: Mapping[str, str], resolve_addr: Callable[[str], str] | None = None) -> DistEnv:
    """This node's DistEnv in a run of `spec`: the spec's nproc_per_node (never the node's GPU count, which
    may differ between nodes), and loopback under the local backend."""
    if env.get(LOCAL_ENV_FLAG):
        return local_dist(derive(env, spec.nproc_per_node), env)
    return derive(env, spec.nproc_per_node, resolve_addr=resolve_addr)
