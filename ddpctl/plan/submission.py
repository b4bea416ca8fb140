"""The submission plan: everything a backend will submit for a spec, built once and frozen (pure).

`build(spec)` is the one place a spec becomes what gets submitted: the batch script (sbatch backend), or
submitit's executor parameters (submitit backend), or nothing beyond the run dir (local backend), and for every
node the torchrun argv and the environment the launcher will give it. `ddpctl submit --dry-run` prints
`plan.text()`; `ddpctl submit` hands the same plan object to the backend, which submits `plan.script` or
`plan.executor_parameters()` as they are (it derives nothing from the spec again).

The per-node part is computed on each node by the launcher, from the allocation Slurm gives it, with the same
function (`ddpctl.node.torchrun.node_plan`); before the allocation exists the plan shows it with placeholder
host names and job id (the local backend's node names and loopback network are the real ones).
"""

from __future__ import annotations

import functools
import json
import shlex
import sys
from dataclasses import dataclass, replace
from typing import Any

from ddpctl.errors import SpecError
from ddpctl.node.gpus import plan_note
from ddpctl.node.localenv import local_network, local_node_env
from ddpctl.node.torchrun import NodePlan, node_plan
from ddpctl.plan import gpucheck
from ddpctl.run import tracking
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv, derive
from ddpctl.spec import JobSpec, capabilities
from ddpctl.spec.capabilities import EXECUTOR, SCRIPT, Capabilities, with_containers

PLACEHOLDER_JOB_ID = "JOBID"
PLACEHOLDER_JOB_NUMBER = "1000"


@dataclass(frozen=True)
class NodePreview:
    """One node's part of the plan: its derived distributed environment and the torchrun argv/env."""

    dist: DistEnv
    plan: NodePlan


@dataclass(frozen=True)
class SubmissionPlan:
    spec: JobSpec  # the resolved spec; job.yaml in the run dir is this spec
    backend: str
    script: str | None = None  # sbatch: the batch script exactly as sbatch gets it
    executor_json: str | None = None  # submitit: SlurmExecutor.update_parameters() keywords, as JSON
    nodes: tuple[NodePreview, ...] = ()
    requeue_why: str = ""  # why spec.requeue.mode is what it is (ddpctl.plan.requeue_mode; said by submit)

    @property
    def capabilities(self) -> Capabilities:
        """What the plan's backend can do (ddpctl.spec.capabilities)."""
        return capabilities.of(self.backend)

    def executor_parameters(self) -> dict[str, Any]:
        """A fresh copy of the executor keywords (the frozen JSON is what the dry run printed)."""
        if self.executor_json is None:
            raise ValueError(f"backend {self.backend}: the plan has no executor parameters")
        parameters: dict[str, Any] = json.loads(self.executor_json)
        return parameters

    def text(self) -> str:
        """What `ddpctl submit --dry-run` prints."""
        parts = []
        if self.script is not None:
            parts += ["# ===== batch script =====", self.script.rstrip("\n")]
        if self.executor_json is not None:
            parts += [
                "# ===== submitit executor parameters (SlurmExecutor.update_parameters) =====",
                self.executor_json,
            ]
        parts.append(f"# ===== per node ({self.node_note()}) =====")
        parts += gpucheck.plan_notes(self.spec)
        if self.capabilities.slurm and (note := plan_note(self.spec.gpus_per_node, self.spec.nproc_per_node)):
            parts.append(note)
        parts += [node_text(node, container_line(self.spec)) for node in self.nodes]
        return "\n".join(parts) + "\n"

    def node_note(self) -> str:
        names = [node.dist.node_name for node in self.nodes]
        hosts = ",".join(names) if len(names) <= 8 else f"{names[0]},...,{names[-1]} ({len(names)})"
        if self.capabilities.loopback:
            return f"placeholder: job id {PLACEHOLDER_JOB_NUMBER}; nodes {hosts} on loopback"
        return f"placeholders: job id {PLACEHOLDER_JOB_NUMBER}, hosts {hosts}"


def container_line(spec: JobSpec) -> str | None:
    if not spec.container.enabled:
        return None
    from ddpctl.plan.container import container_command

    run_dir = shlex.quote(str(spec.run_base.resolve() / PLACEHOLDER_JOB_ID))
    return f"# started in the container by: srun ... {container_command(spec).shell()} {run_dir}"


def node_text(node: NodePreview, container: str | None = None) -> str:
    dist, plan = node.dist, node.plan
    lines = [
        f"# node {dist.node_rank} ({dist.node_name}): NODE_RANK={dist.node_rank} MASTER_ADDR={dist.master_addr} "
        f"MASTER_PORT={dist.master_port} WORLD_SIZE={dist.world_size}"
    ]
    lines += [container] if container else []
    lines += [f"{key}={shlex.quote(value)}" for key, value in plan.env]
    lines.append(shlex.join(plan.argv))
    return "\n".join(lines)


def same_job(first: DistEnv, node_rank: int) -> DistEnv:
    """Another node of the job `first` describes (`derive` gives exactly this for that node's environment)."""
    return replace(first, node_rank=node_rank, node_name=first.hosts[node_rank])


@functools.lru_cache(maxsize=4)
def placeholder_hosts(nodes: int) -> tuple[tuple[str, ...], str]:
    """Names and node list, built once per size: the dry run asks for every node (N lists of N would be N²)."""
    hosts = tuple(f"host{i + 1}" for i in range(nodes))
    return hosts, ",".join(hosts)


def placeholder_env(spec: JobSpec, node_rank: int) -> dict[str, str]:
    hosts, node_list = placeholder_hosts(spec.nodes)
    return {
        "SLURM_JOB_ID": PLACEHOLDER_JOB_NUMBER,
        "SLURM_JOB_NODELIST": node_list,
        "SLURM_JOB_NUM_NODES": str(spec.nodes),
        "SLURM_NODEID": str(node_rank),
        "SLURMD_NODENAME": hosts[node_rank],
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": str(node_rank),
    }


def node_preview(spec: JobSpec, node_rank: int, first: DistEnv | None = None) -> NodePreview:
    """The node's plan as its launcher will build it (`ddpctl.node.launch.prepare`), before an allocation.

    `first` (node 0's DistEnv) lets every other node reuse the parsed host list: nodes differ only in rank and
    name, and deriving each from scratch made a dry run quadratic (10,000 nodes: 26 s; now linear)."""
    layout = RunLayout(spec.run_base / PLACEHOLDER_JOB_ID)
    # In a container the launcher's own interpreter is the image's (`python`, default python3).
    python = (spec.python or "python3") if spec.container.enabled else (spec.python or sys.executable)
    trackers = tracking.placeholder(spec)
    if spec.capabilities.loopback:
        env = local_node_env(spec, int(PLACEHOLDER_JOB_NUMBER), 0, node_rank)
        if first is None:
            dist, ifname, local_addr = local_network(derive(env, spec.nproc_per_node))
        else:
            dist, ifname, local_addr = local_network(same_job(first, node_rank))
        plan = node_plan(
            spec, dist, layout, python=python, ifname=ifname, local_addr=local_addr, inherited=env, trackers=trackers
        )
        return NodePreview(dist, plan)
    if first is None:
        dist = derive(placeholder_env(spec, node_rank), spec.nproc_per_node)
    else:
        dist = same_job(first, node_rank)
    ifname = spec.nccl.socket_ifname or gpucheck.DETECTED
    return NodePreview(
        dist, node_plan(spec, dist, layout, python=python, ifname=ifname, local_addr=None, trackers=trackers)
    )


def build(spec: JobSpec, backend: str | None = None) -> SubmissionPlan:
    """The plan for `spec` on `backend` (default: the spec's own backend)."""
    if backend is not None and backend != spec.backend:
        spec = replace(spec, backend=backend)
    name, caps = spec.backend, spec.capabilities
    if spec.container.enabled and not caps.containers:
        raise SpecError(f"{spec.source}: container: runs with backend {with_containers()} only, not {name}")
    first = node_preview(spec, 0)
    nodes = (first, *(node_preview(spec, rank, first.dist) for rank in range(1, spec.nodes)))
    if caps.submits == SCRIPT:
        from ddpctl.plan.render import render_for

        return SubmissionPlan(spec, name, script=render_for(spec), nodes=nodes)
    if caps.submits == EXECUTOR:
        from ddpctl.plan.executor import executor_parameters

        parameters = executor_parameters(spec, spec.run_base.resolve())
        return SubmissionPlan(spec, name, executor_json=json.dumps(parameters, indent=2), nodes=nodes)
    return SubmissionPlan(spec, name, nodes=nodes)
