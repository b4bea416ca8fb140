"""requeue.mode: auto — requeue (the job requeues itself) or chain (a successor job continues the run), from
the cluster's facts; said in `submit`'s output, in the run's events and by `doctor`.

Facts: `JobRequeue` from `scontrol show config` (0: the site does not want jobs requeued) and the partition's
`PreemptMode` (CANCEL: a preempted job is cancelled, not requeued). The third fact, a failed `scontrol requeue`,
only shows in the job: the batch script then continues the run in a chained job (templates/ddp.sbatch.j2).
The choice is pure (`pick`); gathering the facts is the edge (`gather`, through an injectable Runner).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ddpctl.errors import CommandError, SpecError
from ddpctl.proc import Runner, run
from ddpctl.proc import concurrently as run_concurrently
from ddpctl.slurm import commands
from ddpctl.spec import JobSpec

FALLBACK = "a failed scontrol requeue falls back to a chained job"


class RequeueModeError(SpecError):
    """The backend cannot resume the way this spec or cluster needs (submitit has no chain)."""


@dataclass(frozen=True)
class ClusterFacts:
    job_requeue: int | None = None  # JobRequeue from scontrol show config; None: unknown
    partition: str | None = None  # the partition the job goes to (the default one when the spec names none)
    preempt_mode: str | None = None  # that partition's PreemptMode, e.g. "REQUEUE", "CANCEL", "OFF"


def parse_config(text: str) -> int | None:
    match = re.search(r"^JobRequeue\s*=\s*(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def parse_partitions(text: str, wanted: str | None) -> tuple[str | None, str | None]:
    """(partition, its PreemptMode) from `scontrol show partition -o`; `wanted` None: the default partition."""
    for line in text.splitlines():
        fields = dict(word.partition("=")[::2] for word in line.split() if "=" in word)
        name = fields.get("PartitionName")
        if name and (name == wanted or (wanted is None and fields.get("Default") == "YES")):
            return name, fields.get("PreemptMode")
    return wanted, None


def gather(spec: JobSpec, runner: Runner = run) -> ClusterFacts:
    """The cluster's facts; whatever cannot be asked (no Slurm here) stays None."""
    try:
        config, parts = run_concurrently(lambda: commands.show_config(runner), lambda: commands.show_partitions(runner))
    except CommandError:
        return ClusterFacts(partition=spec.partition)
    job_requeue = parse_config(config.stdout) if config.returncode == 0 else None
    partition, mode = parse_partitions(parts.stdout, spec.partition) if parts.returncode == 0 else (None, None)
    return ClusterFacts(job_requeue, partition or spec.partition, mode)


def needs_chain(facts: ClusterFacts) -> str | None:
    """Why this cluster rules out self-requeue (None: it does not, as far as the facts go)."""
    if facts.job_requeue == 0:
        return "JobRequeue=0 in the cluster's config"
    if facts.preempt_mode and "CANCEL" in facts.preempt_mode.upper().split(","):
        return f"partition {facts.partition} has PreemptMode=CANCEL (a preempted job is cancelled, not requeued)"
    return None


def pick(spec: JobSpec, facts: ClusterFacts) -> tuple[str, str]:
    """(requeue or chain, why) for this spec on this backend and cluster. Raises SpecError where the backend
    cannot do what is needed (submitit has no chain)."""
    mode, backend = spec.requeue.mode, spec.backend
    if backend == "local":
        chosen = "requeue" if mode == "auto" else mode
        return chosen, "local backend: its supervisor starts every attempt itself (requeue and chain alike)"
    reason = needs_chain(facts)
    if backend == "submitit" and spec.requeue.enabled and (mode == "chain" or (mode == "auto" and reason)):
        why = "requeue.mode: chain in the spec" if mode == "chain" else reason
        raise RequeueModeError(
            f"{spec.source}: requeue.mode: {mode}: {why}, but the submitit backend can only requeue "
            "(submitit resubmits through scontrol requeue); expected backend: sbatch, or "
            "requeue.mode: requeue"
        )
    if mode != "auto":
        return mode, f"requeue.mode: {mode} in the spec"
    if reason:
        return "chain", reason
    if facts.job_requeue is None:
        return "requeue", f"cluster facts not available here; {FALLBACK}"
    where = f"partition {facts.partition} PreemptMode={facts.preempt_mode}" if facts.preempt_mode else "no CANCEL"
    return "requeue", f"JobRequeue={facts.job_requeue}, {where}; {FALLBACK}"


def resolve(spec: JobSpec, runner: Runner = run) -> tuple[JobSpec, str]:
    """The spec with its requeue mode decided (never auto), and why."""
    facts = ClusterFacts() if spec.backend == "local" else gather(spec, runner)
    mode, why = pick(spec, facts)
    return dataclasses.replace(spec, requeue=dataclasses.replace(spec.requeue, mode=mode)), why
