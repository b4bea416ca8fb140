"""Which GPU each local rank of a node uses (pure): Slurm's choice, passed through unchanged.

Slurm gives a step's GPUs (GRES) by setting CUDA_VISIBLE_DEVICES (relative to the devices the step may open
under ConstrainDevices) and SLURM_STEP_GPUS / SLURM_JOB_GPUS (the node's device indexes). ddpctl never sets or
rewrites CUDA_VISIBLE_DEVICES: torchrun's local rank r uses `cuda:r`, which is the r-th entry of Slurm's
list, so ranks on a node use distinct devices exactly when the step has at least nproc_per_node of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def visible_devices(env: Mapping[str, str]) -> list[str]:
    """The entries of CUDA_VISIBLE_DEVICES (empty when unset or blank)."""
    return [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]


def node_indexes(env: Mapping[str, str]) -> list[str]:
    """The node's device indexes Slurm gave the step (SLURM_STEP_GPUS, else SLURM_JOB_GPUS)."""
    raw = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or ""
    return [d.strip() for d in raw.split(",") if d.strip()]


def mapping(env: Mapping[str, str], nproc: int) -> list[dict[str, Any]]:
    """Per local rank: the cuda index it uses, the CUDA_VISIBLE_DEVICES entry behind it and, when Slurm says,
    the node's device index (for the launch event and `doctor`)."""
    shown, indexes = visible_devices(env), node_indexes(env)
    out = []
    for rank in range(min(nproc, len(shown))):
        entry: dict[str, Any] = {"local_rank": rank, "cuda": rank, "visible": shown[rank]}
        if len(indexes) == len(shown):
            entry["node_gpu"] = indexes[rank]
        out.append(entry)
    return out


def shortage(env: Mapping[str, str], nproc: int, gpus_per_node: int, node: str) -> str | None:
    """Why this node cannot give each of its nproc ranks its own GPU, or None. Only asked when the spec
    asks for GPUs: CPU-only runs have no CUDA_VISIBLE_DEVICES and need none."""
    if gpus_per_node <= 0:
        return None
    shown = visible_devices(env)
    if len(shown) >= nproc:
        return None
    raw = env.get("CUDA_VISIBLE_DEVICES")
    return (
        f"node {node}: CUDA_VISIBLE_DEVICES={raw!r} gives this step {len(shown)} GPU(s) but nproc_per_node is"
        f" {nproc}: each local rank needs its own GPU (gpus_per_node: {gpus_per_node}; does the step get the"
        " job's GPUs? see `ddpctl doctor`)"
    )


def plan_note(gpus_per_node: int, nproc: int) -> str | None:
    """The dry run's and doctor's line on the mapping, or None for a CPU job."""
    if gpus_per_node <= 0:
        return None
    last = nproc - 1
    return (
        f"# GPUs: {gpus_per_node} per node as Slurm GRES; local rank r (0..{last}) uses cuda:r, the r-th device"
        " of the CUDA_VISIBLE_DEVICES Slurm sets for the step (ddpctl never changes it)"
    )
