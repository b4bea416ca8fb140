"""What `submit` checks against the cluster before sbatch, from the cluster's facts (ddpctl.slurm.cluster): a
partition that does not exist, or a request no partition can ever run (more nodes, more time), is refused with
the limit, instead of a job that pends forever (PartitionNodeLimit) while `logs -f` waits. `doctor` says the
same limits (`limit_s`).

Where the facts could not be gathered (no Slurm here, the controller refused) nothing is checked: sbatch then has
the last word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ddpctl.errors import SpecError
from ddpctl.slurm.cluster import ClusterFacts, Partition
from ddpctl.spec import JobSpec, time_to_seconds


def limit_s(part: Partition) -> int | None:
    """The partition's MaxTime in seconds; None: no limit (UNLIMITED), or none ddpctl can read."""
    try:
        return time_to_seconds(part.max_time or "UNLIMITED")
    except ValueError:  # "n/a", or a spelling of a later Slurm: sbatch has the last word
        return None


@dataclass(frozen=True)
class Exceeded:
    """A partition limit a spec exceeds: its node count, or its MaxTime (`limit` in seconds)."""

    what: Literal["nodes", "time"]
    limit: int


def exceeded(spec: JobSpec, part: Partition) -> Exceeded | None:
    """The partition limit this spec can never run within (its nodes first, then its time), None where it fits
    or the limit is unknown: the one rule behind submit's refusal and doctor's partition check (pure)."""
    if part.total_nodes is not None and spec.alloc_nodes > part.total_nodes:
        return Exceeded("nodes", part.total_nodes)
    wanted, most = (time_to_seconds(spec.time) if spec.time else None), limit_s(part)
    if most is not None and wanted is not None and wanted > most:
        return Exceeded("time", most)
    return None


def _asked(spec: JobSpec) -> str:
    spares = spec.alloc_nodes - spec.nodes
    return f"{spec.nodes} + {spares} spare" if spares else str(spec.nodes)


def problem(spec: JobSpec, facts: ClusterFacts) -> str | None:
    """The one-line refusal for this spec, or None (pure)."""
    if not facts.partitions:
        return None
    names = [p.name for p in facts.partitions]
    if spec.partition and spec.partition not in names:
        return (
            f"{spec.source}: partition: got {spec.partition!r}, expected one of "
            f"{', '.join(sorted(names))} (partitions on this cluster, per scontrol show partition)"
        )
    part = facts.partition(spec.partition)
    over = exceeded(spec, part) if part is not None else None
    if part is None or over is None:
        return None
    if over.what == "nodes":
        return (
            f"{spec.source}: nodes: got {_asked(spec)}, partition {part.name} has {over.limit} node(s); the job "
            "would pend forever (PartitionNodeLimit)"
        )
    return (
        f"{spec.source}: time: got {spec.time}, partition {part.name} allows at most {over.limit} s; the "
        "job would pend forever (PartitionTimeLimit)"
    )


def check_runnable(spec: JobSpec, facts: ClusterFacts) -> None:
    """Raise SpecError (exit 2) when the cluster cannot ever run this spec."""
    refusal = problem(spec, facts)
    if refusal:
        raise SpecError(refusal)
