"""Where this node runs: a Slurm job step, or one of the local backend's simulated nodes (ddpctl.node.localenv).

The node side's one seam for what differs between the two; `node_site` chooses once, from the environment, and
the launcher, the batch side and the exclusion of bad nodes ask the site instead of testing the local flag:

| question                                  | Slurm                                      | local                       |
|-------------------------------------------|--------------------------------------------|-----------------------------|
| the job id the events name (`job_id`)     | SLURM_JOB_ID (a chained successor's own)   | the run directory's name    |
| this node's DistEnv (`dist`)              | derived from the step, master resolved     | the same, all on loopback   |
| GPUs checked against the spec             | yes: the step's GPUs                       | no: one machine's, shared   |
| interface and address given (`network`)   | the spec's or the detected one, its IPv4   | lo, 127.0.0.1               |
| the room to exclude nodes in (`room`)     | the job's partition, asked of slurmctld    | the spec's own list only    |
| node 0's launcher records attempt start   | yes, for the shell that dated it           | no: the supervisor does     |
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from ddpctl.node.exclude import Room
from ddpctl.node.localenv import LOCAL_ENV_FLAG, local_dist
from ddpctl.proc import Runner, run
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import JOB_PARTITION, DistEnv, derive
from ddpctl.spec import JobSpec

Resolver = Callable[[str], str]


class NodeSite(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def checks_gpus(self) -> bool:
        """Whether the node's GPUs are checked against the spec before torchrun starts."""
        ...

    @property
    def records_attempt_start(self) -> bool:
        """Whether node 0's launcher records the attempt's start (for a batch shell that dated it)."""
        ...

    def job_id(self, layout: RunLayout, env: Mapping[str, str]) -> str | None:
        """The id of the job running this attempt, as the run's events name it."""
        ...

    def dist(self, spec: JobSpec, env: Mapping[str, str], resolve_addr: Resolver | None = None) -> DistEnv:
        """This node's DistEnv in a run of `spec` (the spec's nproc_per_node, never the node's GPU count)."""
        ...

    def network(self, spec: JobSpec, dist: DistEnv) -> tuple[str | None, str | None]:
        """The interface the node's traffic goes through and the address it advertises to the others."""
        ...

    def room(self, env: Mapping[str, str], given: frozenset[str], runner: Runner = run) -> Room:
        """The room the run has to exclude a bad node in (`given`: the spec's own exclude list)."""
        ...


@dataclass(frozen=True)
class SlurmSite:
    name: str = "slurm"
    checks_gpus: bool = True
    records_attempt_start: bool = True

    def job_id(self, layout: RunLayout, env: Mapping[str, str]) -> str | None:
        return env.get("SLURM_JOB_ID")  # the job running this attempt: a chained successor has its own

    def dist(self, spec: JobSpec, env: Mapping[str, str], resolve_addr: Resolver | None = None) -> DistEnv:
        return derive(env, spec.nproc_per_node, resolve_addr=resolve_addr)

    def network(self, spec: JobSpec, dist: DistEnv) -> tuple[str | None, str | None]:
        from ddpctl.node import netif

        ifname = spec.nccl.socket_ifname or netif.pick_ifname(dist.node_name)
        return ifname, advertised_address(dist.node_name, ifname)

    def room(self, env: Mapping[str, str], given: frozenset[str], runner: Runner = run) -> Room:
        return partition_room(env.get(JOB_PARTITION), given, runner)


@dataclass(frozen=True)
class LocalSite:
    """The local backend's simulated nodes: one machine, its GPUs shared, its names unresolvable."""

    name: str = "local"
    checks_gpus: bool = False
    records_attempt_start: bool = False  # the local supervisor records it

    def job_id(self, layout: RunLayout, env: Mapping[str, str]) -> str | None:
        # The local job is "local-7" everywhere else (its run directory's name), not the simulated SLURM_JOB_ID 7:
        # the events name it with that one id.
        return layout.root.name

    def dist(self, spec: JobSpec, env: Mapping[str, str], resolve_addr: Resolver | None = None) -> DistEnv:
        return local_dist(derive(env, spec.nproc_per_node), env)

    def network(self, spec: JobSpec, dist: DistEnv) -> tuple[str | None, str | None]:
        return "lo", "127.0.0.1"

    def room(self, env: Mapping[str, str], given: frozenset[str], runner: Runner = run) -> Room:
        return Room(given=given)  # no partition: the supervisor names simulated nodes past the excluded ones


SLURM: NodeSite = SlurmSite()
LOCAL: NodeSite = LocalSite()


def node_site(env: Mapping[str, str]) -> NodeSite:
    """The site this node runs on: local where the local backend set its flag (`localenv.local_node_env`)."""
    return LOCAL if env.get(LOCAL_ENV_FLAG) else SLURM


def advertised_address(node_name: str, ifname: str | None) -> str | None:
    """The IPv4 address this node advertises to the others (never loopback)."""
    from ddpctl.node import netif

    if ifname:
        address = netif.interface_ipv4(ifname)
        if address:
            return address
    try:
        address = socket.gethostbyname(node_name)
    except OSError:
        return None
    return None if address.startswith("127.") else address


def partition_room(partition: str | None, given: frozenset[str], runner: Runner = run) -> Room:
    """The job's partition's size and nodes, asked of the controller; unknown where it does not answer."""
    from ddpctl.errors import HostlistError  # imported here: only a failed attempt excluding a node needs these
    from ddpctl.slurm.cluster import gather_partitions
    from ddpctl.slurm.hostlist import expand

    found = gather_partitions(runner).partition(partition) if partition else None
    if found is None:
        return Room(partition=partition, given=given)
    try:
        hosts = frozenset(expand(found.hosts)) if found.hosts else None
    except HostlistError:
        hosts = None
    return Room(partition=partition, total_nodes=found.total_nodes, hosts=hosts, given=given)
