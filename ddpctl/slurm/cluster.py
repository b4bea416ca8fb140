"""The cluster's facts, gathered once at the edge: `ClusterFacts`, the one answer to "what is this cluster?".

Two controller questions, asked at the same time (`scontrol show config` and `scontrol show partition -o`), and a
third only for `doctor` (`scontrol show node -o`, for GRES); each text is read by the one case-insensitive
parser in `scontrol`, so a key whose capitals changed between 22.05 and 24.11 reads the same. Everything that
decides from these facts (the submit preflight, requeue.mode auto, doctor's lines) is a pure function of a
`ClusterFacts` in plan/. `parse` turns captured texts into facts with no command run: the tests' seam.

No sinfo: `scontrol show partition` has every partition fact ddpctl uses (TotalNodes, MaxTime, State,
Default, PreemptMode, GraceTime), so one question and one parser serve submit and doctor alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ddpctl.errors import CommandError
from ddpctl.proc import Completed, Runner, available, concurrently, run
from ddpctl.slurm import commands, scontrol

_CRED_EXPIRE = re.compile(r"\bcred_expire=(\d+)")


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    state: str | None  # UP, DOWN, DRAIN, INACTIVE
    total_nodes: int | None
    max_time: str | None  # MaxTime as Slurm prints it (UNLIMITED, 1-00:00:00); plan/ reads it as seconds
    preempt_mode: str | None  # REQUEUE, CANCEL, OFF, SUSPEND,GANG, ...
    grace_s: int | None
    hosts: str = ""  # Nodes=, a hostlist expression


@dataclass(frozen=True)
class Node:
    name: str
    partitions: tuple[str, ...]
    gres: str  # as scontrol prints it, "(null)" for none
    gpus: int


@dataclass(frozen=True)
class ClusterFacts:
    """What ddpctl knows about the cluster; `config_read` False (and the fields None) where it could not ask."""

    config_read: bool = False
    version: str | None = None  # SLURM_VERSION, e.g. 22.05.8
    task_plugin: str | None = None
    proctrack: str | None = None
    preempt_type: str | None = None
    ctld_parameters: str | None = None  # SlurmctldParameters (preempt_send_user_signal)
    job_requeue: int | None = None  # JobRequeue: 0, the site does not want jobs requeued
    cred_expire_s: int | None = None  # AuthInfo's cred_expire: a requeued job is held this long + 1 s
    max_array_size: int | None = None
    partitions: tuple[Partition, ...] = ()
    nodes: tuple[Node, ...] = ()  # asked only by doctor (gather(with_nodes=True))
    why_missing: str = ""  # why a question went unanswered ("" when all were)

    def partition(self, wanted: str | None) -> Partition | None:
        """The partition a job goes to: the named one, else the default one; None when neither is listed."""
        return next((p for p in self.partitions if p.name == wanted or (wanted is None and p.default)), None)

    def version_tuple(self) -> tuple[int, int] | None:
        return scontrol.version(self.version)


def _int(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def parse_partitions(text: str) -> tuple[Partition, ...]:
    """`scontrol show partition -o`, one record per line (pure)."""
    found = []
    for fields in scontrol.parse_records(text):
        name = fields.find("PartitionName")
        if name:
            found.append(
                Partition(
                    name=name,
                    default=(fields.find("Default") or "").upper() == "YES",
                    state=fields.find("State"),
                    total_nodes=_int(fields.find("TotalNodes")),
                    max_time=fields.find("MaxTime"),
                    preempt_mode=fields.find("PreemptMode"),
                    grace_s=scontrol.seconds(fields.find("GraceTime")),
                    hosts=fields.find("Nodes") or "",
                )
            )
    return tuple(found)


def parse_node_records(text: str) -> tuple[Node, ...]:
    """`scontrol show node -o`, one record per line (pure)."""
    found = []
    for fields in scontrol.parse_records(text):
        name = fields.find("NodeName")
        if name:
            gres = fields.find("Gres") or "(null)"
            parts = tuple(p for p in (fields.find("Partitions") or "").split(",") if p)
            found.append(Node(name=name, partitions=parts, gres=gres, gpus=scontrol.gres_gpus(gres)))
    return tuple(found)


def parse(config: str | None, partitions: str | None, nodes: str | None = None, why: str = "") -> ClusterFacts:
    """The facts in these texts (None: that question went unanswered); pure."""
    fields = scontrol.parse_config(config or "")
    cred = _CRED_EXPIRE.search(fields.find("AuthInfo") or "") or _CRED_EXPIRE.search(fields.find("CredParams") or "")
    return ClusterFacts(
        config_read=config is not None,
        version=fields.find("SLURM_VERSION"),
        task_plugin=fields.find("TaskPlugin"),
        proctrack=fields.find("ProctrackType"),
        preempt_type=fields.find("PreemptType"),
        ctld_parameters=fields.find("SlurmctldParameters"),
        job_requeue=_int(fields.find("JobRequeue")),
        cred_expire_s=int(cred.group(1)) if cred else None,
        max_array_size=_int(fields.find("MaxArraySize")),
        partitions=parse_partitions(partitions or ""),
        nodes=parse_node_records(nodes or ""),
        why_missing=why,
    )


def gather(runner: Runner = run, *, with_nodes: bool = False) -> ClusterFacts:
    """Ask the controller, every question at once (each is a round trip); what cannot be asked stays unknown."""
    asks: list[Callable[[Runner], Completed]] = [commands.show_config, commands.show_partitions]
    if with_nodes:
        asks.append(commands.show_nodes)
    try:
        done = concurrently(*(lambda ask=ask: ask(runner) for ask in asks))
    except CommandError as err:  # no scontrol here, or the controller did not answer in time
        return ClusterFacts(why_missing=str(err))
    texts = [d.stdout if d.returncode == 0 else None for d in done]
    failed = next((d for d in done if d.returncode != 0), None)
    why = f"{' '.join(failed.argv)} failed: {failed.stderr.strip()[:200]}" if failed else ""
    return parse(texts[0], texts[1], texts[2] if with_nodes else None, why)


def gather_here(*, with_nodes: bool = False) -> ClusterFacts:
    """`gather` from this host's scontrol; none on PATH: facts saying so, no command tried (submit, sweep, doctor)."""
    if not available("scontrol"):
        return ClusterFacts(why_missing="scontrol is not on PATH")
    return gather(with_nodes=with_nodes)


def gather_partitions(runner: Runner = run) -> ClusterFacts:
    """Only the partitions (one question: a running job sizing its own partition, ddpctl.node.site)."""
    try:
        done = commands.show_partitions(runner)
    except CommandError as err:
        return ClusterFacts(why_missing=str(err))
    if done.returncode != 0:
        return ClusterFacts(why_missing=f"{' '.join(done.argv)} failed: {done.stderr.strip()[:200]}")
    return ClusterFacts(partitions=parse_partitions(done.stdout))
