"""requeue.mode: auto — requeue (the job requeues itself) or chain (a successor job continues the run), from
the cluster's facts; said in `submit`'s output, in the run's events and by `doctor`.

Facts: `JobRequeue` from `scontrol show config` (0: the site does not want jobs requeued) and the partition's
`PreemptMode` (CANCEL: a preempted job is cancelled, not requeued). The third fact, a failed `scontrol requeue`,
only shows in the job: the batch script then continues the run in a chained job (templates/ddp.sbatch.j2).
The choice is pure (`pick`, `resolve_mode`), of the facts ddpctl.slurm.cluster gathered at the edge.
"""

from __future__ import annotations

import dataclasses

from ddpctl.errors import SpecError
from ddpctl.slurm.cluster import ClusterFacts, Partition
from ddpctl.spec import JobSpec
from ddpctl.spec.capabilities import BACKENDS

FALLBACK = "a failed scontrol requeue falls back to a chained job"


class RequeueModeError(SpecError):
    """The backend cannot resume the way this spec or cluster needs (one without `chain`: submitit)."""


def needs_chain(facts: ClusterFacts, part: Partition | None) -> str | None:
    """Why this cluster rules out self-requeue on this partition (None: it does not, as far as the facts go)."""
    if facts.job_requeue == 0:
        return "JobRequeue=0 in the cluster's config"
    if part and part.preempt_mode and "CANCEL" in part.preempt_mode.upper().split(","):
        return f"partition {part.name} has PreemptMode=CANCEL (a preempted job is cancelled, not requeued)"
    return None


def pick(spec: JobSpec, facts: ClusterFacts) -> tuple[str, str]:
    """(requeue or chain, why) for this spec on this backend and cluster. Raises SpecError where the backend
    cannot do what is needed (submitit has no chain)."""
    mode, backend, caps = spec.requeue.mode, spec.backend, spec.capabilities
    if caps.own_attempts:
        chosen = "requeue" if mode == "auto" else mode
        return chosen, f"{backend} backend: its supervisor starts every attempt itself (requeue and chain alike)"
    part = facts.partition(spec.partition)  # the named partition, else the default one
    reason = needs_chain(facts, part)
    if not caps.chain and spec.requeue.enabled and (mode == "chain" or (mode == "auto" and reason)):
        why = "requeue.mode: chain in the spec" if mode == "chain" else reason
        chaining = ", ".join(n for n, c in BACKENDS.items() if c.chain and c.slurm)
        raise RequeueModeError(
            f"{spec.source}: requeue.mode: {mode}: {why}, but the {backend} backend can only requeue "
            f"({backend} resubmits through scontrol requeue); expected backend: {chaining}, or "
            "requeue.mode: requeue"
        )
    if mode != "auto":
        return mode, f"requeue.mode: {mode} in the spec"
    if reason:
        return "chain", reason
    if facts.job_requeue is None:
        return "requeue", f"cluster facts not available here; {FALLBACK}"
    where = f"partition {part.name} PreemptMode={part.preempt_mode}" if part and part.preempt_mode else "no CANCEL"
    return "requeue", f"JobRequeue={facts.job_requeue}, {where}; {FALLBACK}"


def resolve_mode(spec: JobSpec, facts: ClusterFacts) -> tuple[JobSpec, str]:
    """The spec with its requeue mode decided (never auto), and why (pure)."""
    mode, why = pick(spec, facts)
    return dataclasses.replace(spec, requeue=dataclasses.replace(spec.requeue, mode=mode)), why
