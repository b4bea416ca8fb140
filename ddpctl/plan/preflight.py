"""What `submit` checks against the cluster before sbatch, from what `doctor` knows (sinfo): a partition that
does not exist, or a request no partition can ever run (more nodes, more time), is refused with the limit,
instead of a job that pends forever (PartitionNodeLimit) while `logs -f` waits.

Without sinfo (or when it fails) nothing is checked: sbatch then has the last word.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpctl import proc
from ddpctl.errors import SpecError
from ddpctl.spec import JobSpec, time_to_seconds


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: int
    max_s: int | None  # None: no time limit
    default: bool


def parse_partitions(text: str) -> dict[str, Partition]:
    """`sinfo -h -o %P|%D|%l`: one line per partition and node state; node counts add up (pure)."""
    found: dict[str, Partition] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        raw, count, limit = (p.strip() for p in parts)
        name = raw.rstrip("*")
        try:
            max_s = time_to_seconds(limit)
        except Exception:  # "infinite", "n/a"
            max_s = None
        old = found.get(name)
        nodes = int(count) + (old.nodes if old else 0)
        found[name] = Partition(name, nodes, max_s, raw.endswith("*") or bool(old and old.default))
    return found


def problem(spec: JobSpec, partitions: dict[str, Partition]) -> str | None:
    """The one-line refusal for this spec, or None (pure)."""
    if not partitions:
        return None
    if spec.partition and spec.partition not in partitions:
        return (
            f"{spec.source}: partition: got {spec.partition!r}, expected one of "
            f"{', '.join(sorted(partitions))} (partitions on this cluster, per sinfo)"
        )
    part = partitions.get(spec.partition or "") or next((p for p in partitions.values() if p.default), None)
    if part is None:
        return None
    if spec.nodes > part.nodes:
        return (
            f"{spec.source}: nodes: got {spec.nodes}, partition {part.name} has {part.nodes} node(s); the job "
            "would pend forever (PartitionNodeLimit)"
        )
    wanted = time_to_seconds(spec.time) if spec.time else None
    if part.max_s is not None and wanted is not None and wanted > part.max_s:
        return (
            f"{spec.source}: time: got {spec.time}, partition {part.name} allows at most {part.max_s} s; the "
            "job would pend forever (PartitionTimeLimit)"
        )
    return None


def check_partition(spec: JobSpec, runner: proc.Runner = proc.run) -> None:
    """Raise SpecError (exit 2) when the cluster cannot ever run this spec."""
    if spec.backend == "local" or not proc.available("sinfo"):
        return
    from ddpctl.slurm import commands

    text = commands.sinfo_partitions(runner)
    if text is None:
        return
    refusal = problem(spec, parse_partitions(text))
    if refusal:
        raise SpecError(refusal)
