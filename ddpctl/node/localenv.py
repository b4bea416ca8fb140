"""The environment the local backend gives each simulated node: what a Slurm step would set (pure).

Node names are local1..localN; `LOCAL_ENV_FLAG` tells the node side it runs on such a node
(`ddpctl.node.site.node_site`), which then puts everything on loopback (`local_network`), since those names do
not resolve.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace

from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec

LOCAL_ENV_FLAG = "DDPCTL_LOCAL"
# The attempt's rendezvous port on loopback, chosen free by the supervisor. Slurm's hashed port (of the job id)
# does not do here: local job numbers are counted per registry, so jobs of two DDPCTL_HOMEs share numbers.
MASTER_PORT_VAR = "DDPCTL_LOCAL_MASTER_PORT"  # set by the local backend for its simulated nodes


@functools.lru_cache(maxsize=4)
def local_hosts(nodes: int, excluded: frozenset[str] = frozenset()) -> tuple[tuple[str, ...], str]:
    """The simulated nodes' names and their node list, built once per size (a dry run asks for every node):
    the first `nodes` of local1, local2, ... that the run has not excluded (a bad node is never used again)."""
    names = (f"local{i + 1}" for i in range(nodes + len(excluded)))
    hosts = tuple(name for name in names if name not in excluded)[:nodes]
    return hosts, ",".join(hosts)


def local_node_env(
    spec: JobSpec,
    job_number: int,
    attempt: int,
    node_rank: int,
    port: int | None = None,
    *,
    excluded: frozenset[str] = frozenset(),
) -> dict[str, str]:
    hosts, node_list = local_hosts(spec.nodes, excluded)
    env = {
        "SLURM_JOB_ID": str(job_number),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": node_list,
        "SLURM_JOB_NUM_NODES": str(spec.nodes),
        "SLURM_NNODES": str(spec.nodes),
        "SLURM_NODEID": str(node_rank),
        "SLURMD_NODENAME": hosts[node_rank],
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": str(node_rank),
        "SLURM_NTASKS": str(spec.nodes),
        LOCAL_ENV_FLAG: "1",
    }
    if port is not None:
        env[MASTER_PORT_VAR] = str(port)
    if attempt > 0:  # like Slurm: absent on the first run
        env["SLURM_RESTART_COUNT"] = str(attempt)
    return env


def local_dist(dist: DistEnv, env: Mapping[str, str] | None = None) -> DistEnv:
    """Local backend: the simulated nodes' names do not resolve; everything is on loopback, on the port the
    supervisor found free for this attempt (`MASTER_PORT_VAR`; a dry run has none and shows the hashed one)."""
    port = (env or {}).get(MASTER_PORT_VAR)
    return replace(dist, master_addr="127.0.0.1", master_port=int(port) if port else dist.master_port)


def local_network(dist: DistEnv, env: Mapping[str, str] | None = None) -> tuple[DistEnv, str, str]:
    """Local backend: loopback for everything (`local_dist`), interface lo."""
    return local_dist(dist, env), "lo", "127.0.0.1"
