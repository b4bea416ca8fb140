"""Read a Slurm job step's environment (pure: callers pass the mapping) and derive torchrun's settings.

Every SLURM_* name ddpctl reads is in the table below; other modules import the names from here.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ddpctl.errors import HostlistError, SlurmEnvError
from ddpctl.slurm import stepshape
from ddpctl.slurm.hostlist import compress, expand
from ddpctl.slurm.stepshape import (
    GPUS_ON_NODE,
    JOB_NODELIST,
    STEP_NODELIST,
    STEP_NUM_NODES,
    check_one_task_per_node,
    het_component,
)

JOB_ID = "SLURM_JOB_ID"
ARRAY_JOB_ID = "SLURM_ARRAY_JOB_ID"
ARRAY_TASK_ID = "SLURM_ARRAY_TASK_ID"
NODELIST = "SLURM_NODELIST"
JOB_NUM_NODES = "SLURM_JOB_NUM_NODES"
NNODES = "SLURM_NNODES"
NODEID = "SLURM_NODEID"
NODENAME = "SLURMD_NODENAME"
STEP_ID = "SLURM_STEP_ID"
PROCID = "SLURM_PROCID"
RESTART_COUNT = "SLURM_RESTART_COUNT"
JOB_PARTITION = "SLURM_JOB_PARTITION"
# Attempts before this job in a chain of jobs (requeue.mode: chain; set by the batch script of a successor).
CHAIN_ATTEMPT = "DDPCTL_CHAIN_ATTEMPT"
# spare_nodes: the batch shell runs each step on `nodes` of the allocation's nodes (the step's hosts, not the job's,
# make the world) and counts the attempts it restarted inside this job (ddpctl.node.spare).
SPARE_NODES = "DDPCTL_SPARE_NODES"
ALLOC_RESTARTS = "DDPCTL_ALLOC_RESTARTS"

VARIABLES: Mapping[str, str] = MappingProxyType(
    {
        JOB_ID: "job id; each array task has its own",
        ARRAY_JOB_ID: "array tasks only: the array's id (`scontrol requeue` wants <array id>_<task id>)",
        ARRAY_TASK_ID: "array tasks only: this task's index",
        JOB_NODELIST: "the job's hosts as a hostlist expression; first host is MASTER_ADDR",
        NODELIST: "older spelling of SLURM_JOB_NODELIST, still exported",
        JOB_NUM_NODES: "number of nodes in the job -> NNODES",
        NNODES: "fallback for SLURM_JOB_NUM_NODES (inside a step it counts the step's nodes)",
        STEP_NUM_NODES: "set by srun; must equal the job's node count or some nodes would never join",
        NODEID: "this node's index in the step -> NODE_RANK; set by srun (the batch shell sees only 0)",
        NODENAME: "this node's Slurm name (set by slurmd)",
        STEP_ID: "set inside a job step (srun); its absence means we run in the batch shell",
        PROCID: "task rank within the step (one task per node under ddpctl launch)",
        RESTART_COUNT: "absent on the first run, then 1, 2, ... after each requeue",
        JOB_PARTITION: "the partition the job runs in: excluded nodes must leave enough of it",
        GPUS_ON_NODE: "GPUs allocated on this node (may differ between nodes; see stepshape.GPUS_PER_NODE)",
        **stepshape.SHAPE_VARIABLES,
    }
)

# Launcher ports: below torchrun's defaults (29400 c10d, 29500 static) and the Linux ephemeral range
# (32768-60999, where outgoing sockets and NCCL/Gloo's own listeners land), above the 1xxxx ports that Slurm
# sites reserve for MPI/PMIx (MpiParams=ports=12000-12999 is the documented example).
PORT_MIN = 20000
PORT_MAX = 28999

NOT_IN_JOB = "not inside a Slurm job: run under sbatch/srun (or `submit --backend local`)"
NOT_IN_STEP = "not inside a Slurm job step: run under srun"


@dataclass(frozen=True)
class SlurmContext:
    """Raw facts about this job step, read from the environment; no hostlist expansion yet."""

    job_id: str
    array_job_id: str | None
    array_task_id: str | None
    node_list: str
    num_nodes: int
    node_id: int
    node_name: str | None
    restart_count: int
    step_id: str | None
    step_num_nodes: int | None = None
    gpus_on_node: int | None = None
    het_group: int | None = None  # the component of a heterogeneous job this step runs on

    @property
    def whose_nodes(self) -> str:
        return "the job's" if self.het_group is None else f"heterogeneous job component {self.het_group}'s"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SlurmContext:
        job_id = stepshape.var(env, JOB_ID)
        if job_id is None:
            raise SlurmEnvError(NOT_IN_JOB)
        node_id = stepshape.count_var(env, NODEID)
        step_id = stepshape.var(env, STEP_ID)
        if node_id is None or step_id is None:
            raise SlurmEnvError(NOT_IN_STEP)
        het = het_component(env, stepshape.var(env, NODENAME))
        node_list, num_nodes = _step_world(env, job_id) if stepshape.count_var(env, SPARE_NODES) else (None, None)
        if node_list is None:
            node_list = het[1] if het else stepshape.var(env, JOB_NODELIST) or stepshape.var(env, NODELIST)
        if node_list is None:
            raise SlurmEnvError(f"{JOB_NODELIST} (or {NODELIST}) is not set in Slurm job {job_id}")
        if num_nodes is None:
            num_nodes = het[2] if het else stepshape.count_var(env, JOB_NUM_NODES)
        if num_nodes is None:
            num_nodes = stepshape.count_var(env, NNODES)
        if num_nodes is None:
            raise SlurmEnvError(f"{JOB_NUM_NODES} (or {NNODES}) is not set in Slurm job {job_id}")
        return cls(
            job_id=job_id,
            array_job_id=stepshape.var(env, ARRAY_JOB_ID),
            array_task_id=stepshape.var(env, ARRAY_TASK_ID),
            node_list=node_list,
            num_nodes=num_nodes,
            node_id=node_id,
            node_name=stepshape.var(env, NODENAME),
            restart_count=attempt_number(env),
            step_id=step_id,
            step_num_nodes=stepshape.count_var(env, STEP_NUM_NODES),
            gpus_on_node=stepshape.count_var(env, GPUS_ON_NODE),
            het_group=het[0] if het else None,
        )

    @property
    def requeue_id(self) -> str:
        """The id `scontrol requeue` needs: an array task is addressed as <array job id>_<task id>."""
        if self.array_job_id is not None and self.array_task_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        return self.job_id


def _step_world(env: Mapping[str, str], job_id: str) -> tuple[str, int]:
    """With spare nodes the step runs on part of the allocation: its own hosts are the world (SLURM_NODEID counts
    within the step; checked on 22.05 and 24.11, tests/cluster/README.md)."""
    node_list, num_nodes = stepshape.var(env, STEP_NODELIST), stepshape.count_var(env, STEP_NUM_NODES)
    if node_list is None or num_nodes is None:
        raise SlurmEnvError(
            f"{SPARE_NODES} is set but {STEP_NODELIST}/{STEP_NUM_NODES} are not (job {job_id}): run under srun"
        )
    return node_list, num_nodes


def gpus_on_node(env: Mapping[str, str]) -> int | None:
    """SLURM_GPUS_ON_NODE as an int (None when unset); readable outside a job step, unlike SlurmContext."""
    return stepshape.count_var(env, GPUS_ON_NODE)


def _hashed_port(job_id: str, array_task_id: str | None, restart_count: int) -> int:
    key = f"{job_id}\0{array_task_id or ''}\0{restart_count}".encode()
    digest = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
    return PORT_MIN + digest % (PORT_MAX - PORT_MIN + 1)


def master_port(job_id: str, array_task_id: str | None, restart_count: int) -> int:
    """A port in PORT_MIN..PORT_MAX that every node of this run computes alike.

    A stable digest (not the per-process salted hash()) of job id, array task and restart count, so two jobs
    sharing a master node collide with probability 1/9000. A requeued run never reuses the previous
    attempt's port (on a tie it takes the next one), since that attempt's processes may still hold it.
    """
    port = previous = -1
    for attempt in range(restart_count + 1):
        port = _hashed_port(job_id, array_task_id, attempt)
        if port == previous:
            port = PORT_MIN if port == PORT_MAX else port + 1
        previous = port
    return port


@dataclass(frozen=True)
class DistEnv:
    """What torchrun needs on this node, identical on every node except node_rank and node_name."""

    master_addr: str
    master_port: int
    node_rank: int
    nnodes: int
    nproc_per_node: int
    world_size: int
    rdzv_id: str
    restart_count: int
    job_id: str
    node_name: str
    hosts: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": self.master_port,
            "NODE_RANK": self.node_rank,
            "NNODES": self.nnodes,
            "NPROC_PER_NODE": self.nproc_per_node,
            "WORLD_SIZE": self.world_size,
            "RESTART_COUNT": self.restart_count,
            "RDZV_ID": self.rdzv_id,
            "JOB_ID": self.job_id,
            "NODE_NAME": self.node_name,
            "HOSTS": list(self.hosts),
        }

    def as_lines(self) -> list[str]:
        """`KEY=value` lines for people; HOSTS is written back as a compact hostlist."""
        fields = self.as_json()
        fields["HOSTS"] = compress(self.hosts)
        return [f"{key}={value}" for key, value in fields.items()]


@functools.lru_cache(maxsize=4)
def _expand_once(node_list: str) -> tuple[str, ...]:
    # A dry run derives every node's DistEnv from the same node list: expanding it once keeps that linear.
    return tuple(expand(node_list))


def _hosts(ctx: SlurmContext) -> tuple[str, ...]:
    try:
        hosts = _expand_once(ctx.node_list)
    except HostlistError as err:
        raise SlurmEnvError(f"{JOB_NODELIST}: {err}") from err
    if len(hosts) != ctx.num_nodes:
        list_name, count_name = (
            (JOB_NODELIST, JOB_NUM_NODES)
            if ctx.het_group is None
            else (f"{JOB_NODELIST}_HET_GROUP_{ctx.het_group}", f"{JOB_NUM_NODES}_HET_GROUP_{ctx.het_group}")
        )
        raise SlurmEnvError(f"{list_name}={ctx.node_list!r} names {len(hosts)} hosts but {count_name}={ctx.num_nodes}")
    if ctx.step_num_nodes is not None and ctx.step_num_nodes != ctx.num_nodes:
        raise SlurmEnvError(
            f"this step runs on {ctx.step_num_nodes} of {ctx.whose_nodes} {ctx.num_nodes} nodes ({STEP_NUM_NODES}): "
            "run srun over every node of the job, one task per node"
        )
    if ctx.node_id >= ctx.num_nodes:
        raise SlurmEnvError(f"{NODEID}={ctx.node_id} is outside 0..{ctx.num_nodes - 1} ({JOB_NUM_NODES})")
    return hosts


def _resolve(host: str, resolve_addr: Callable[[str], str] | None) -> str:
    if resolve_addr is None:
        return host
    try:
        return resolve_addr(host)
    except OSError as err:
        raise SlurmEnvError(f"cannot resolve master host {host!r} (first of {JOB_NODELIST}): {err}") from err


def derive(env: Mapping[str, str], nproc_per_node: int, *, resolve_addr: Callable[[str], str] | None = None) -> DistEnv:
    """DistEnv for this node from a job step's environment; MASTER_ADDR is the first host of the node list."""
    if nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be >= 1, got {nproc_per_node}")
    ctx = SlurmContext.from_env(env)
    hosts = _hosts(ctx)
    check_one_task_per_node(env, ctx.step_num_nodes or ctx.num_nodes)
    return DistEnv(
        master_addr=_resolve(hosts[0], resolve_addr),
        master_port=master_port(ctx.job_id, ctx.array_task_id, ctx.restart_count),
        node_rank=ctx.node_id,
        nnodes=ctx.num_nodes,
        nproc_per_node=nproc_per_node,
        world_size=ctx.num_nodes * nproc_per_node,
        rdzv_id=f"{ctx.requeue_id}.{ctx.restart_count}",
        restart_count=ctx.restart_count,
        job_id=ctx.job_id,
        node_name=ctx.node_name or hosts[ctx.node_id],
        hosts=hosts,
    )


def attempt_number(env: Mapping[str, str]) -> int:
    """The run's attempt: Slurm's restart count, plus the attempts of earlier jobs of a chain, plus the attempts the
    batch shell restarted inside this job on its spare nodes."""
    counts = (stepshape.count_var(env, name) for name in (RESTART_COUNT, CHAIN_ATTEMPT, ALLOC_RESTARTS))
    return sum(count or 0 for count in counts)


def job_hosts(env: Mapping[str, str]) -> frozenset[str] | None:
    """Every host of the job's allocation (a heterogeneous job's components too); None where the environment
    does not say (outside a job, or a list that is not a hostlist)."""
    lists = [value for key, value in env.items() if key.startswith(f"{JOB_NODELIST}_HET_GROUP_")]
    lists.append(env.get(JOB_NODELIST) or env.get(NODELIST) or "")
    try:
        hosts = frozenset(host for text in lists if text for host in expand(text))
    except HostlistError:
        return None
    return hosts or None
