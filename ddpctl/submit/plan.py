"""The submission plan as text: what `ddpctl submit --dry-run` prints (pure).

Besides the batch script it shows, for every node, the exact torchrun argv and the environment the launcher
would give it — with placeholder host names and job id, since the real ones exist only once Slurm allocates.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace

from ddpctl.node.torchrun import node_plan
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv, derive
from ddpctl.spec import JobSpec

PLACEHOLDER_JOB_ID = "JOBID"
PLACEHOLDER_JOB_NUMBER = "1000"


def placeholder_hosts(nodes: int) -> list[str]:
    return [f"host{i + 1}" for i in range(nodes)]


def placeholder_env(spec: JobSpec, node_rank: int) -> dict[str, str]:
    hosts = placeholder_hosts(spec.nodes)
    return {
        "SLURM_JOB_ID": PLACEHOLDER_JOB_NUMBER, "SLURM_JOB_NODELIST": ",".join(hosts),
        "SLURM_JOB_NUM_NODES": str(spec.nodes), "SLURM_NODEID": str(node_rank),
        "SLURMD_NODENAME": hosts[node_rank], "SLURM_STEP_ID": "0", "SLURM_PROCID": str(node_rank),
    }


def node_preview(spec: JobSpec, node_rank: int, first: DistEnv | None = None) -> str:
    """One node's block. `first` (node 0's DistEnv) lets every other node reuse the parsed host list: nodes
    differ only in rank and name, and deriving each from scratch made a 10,000-node dry run quadratic (26 s)."""
    if first is None:
        dist = derive(placeholder_env(spec, node_rank), spec.nproc_per_node)
    else:
        dist = replace(first, node_rank=node_rank, node_name=first.hosts[node_rank])
    layout = RunLayout(spec.run_base / PLACEHOLDER_JOB_ID)
    ifname = spec.nccl.socket_ifname or "<detected>"
    python = spec.python or sys.executable
    plan = node_plan(spec, dist, layout, python=python, ifname=ifname, local_addr=None)
    lines = [f"# node {node_rank} ({dist.node_name}): NODE_RANK={dist.node_rank} MASTER_ADDR={dist.master_addr} "
             f"MASTER_PORT={dist.master_port} WORLD_SIZE={dist.world_size}"]
    lines += [f"{key}={shlex.quote(value)}" for key, value in plan.env]
    lines.append(shlex.join(plan.argv))
    return "\n".join(lines)


def plan_text(spec: JobSpec, script: str | None) -> str:
    parts = []
    if script is not None:
        parts += ["# ===== batch script =====", script.rstrip("\n")]
    hosts = "host1" if spec.nodes == 1 else f"host[1-{spec.nodes}]"
    parts.append(f"# ===== per node (placeholders: job id {PLACEHOLDER_JOB_NUMBER}, hosts {hosts}) =====")
    first = derive(placeholder_env(spec, 0), spec.nproc_per_node)
    parts += [node_preview(spec, rank, first) for rank in range(spec.nodes)]
    return "\n".join(parts) + "\n"
