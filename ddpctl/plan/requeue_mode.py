"""requeue.mode: auto — requeue (the job requeues itself) or chain (a successor job continues the run), from
the cluster's facts; said in `submit`'s output, in the run's events and by `doctor`.

Facts: `JobRequeue` from `scontrol show config` (0: the site does not want jobs requeued) and the partition's
`PreemptMode` (CANCEL: a preempted job is cancelled, not requeued) rule the requeue out; the requeue hold
(`cred_expire` + 1 s, default 121 s) makes the chain the faster of the two where both are allowed. What only
shows in the job is handled there (templates/ddp.sbatch.j2): a failed `scontrol requeue` continues the run in a
chained job, a refused successor (a QOS's submit limit, a partition that takes no new jobs) by a requeue.
The choice is pure (`pick`, `resolve_mode`), of the facts ddpctl.slurm.cluster gathered at the edge.
"""

from __future__ import annotations

import dataclasses

from ddpctl.errors import SpecError
from ddpctl.slurm.cluster import ClusterFacts, Partition
from ddpctl.spec import JobSpec
from ddpctl.spec.capabilities import BACKENDS

FALLBACK = "a failed scontrol requeue falls back to a chained job"
# Slurm's cred_expire when the config does not set it: a requeued job may not start again for this + 1 s.
DEFAULT_CRED_EXPIRE_S = 120
# From this hold on, `auto` chains where requeue is allowed too: the successor is a new job that Slurm does not
# hold (measured at cred_expire=120: requeue 136-138 s, chain 16-21 s from preemption to the first resumed step,
# benchmarks/README.md); below it the requeue keeps the job id at a cost of seconds.
CHAIN_FROM_HOLD_S = 30


class RequeueModeError(SpecError):
    """The backend cannot resume the way this spec or cluster needs (one without `chain`: submitit)."""


def needs_chain(facts: ClusterFacts, part: Partition | None) -> str | None:
    """Why this cluster rules out self-requeue on this partition (None: it does not, as far as the facts go)."""
    if facts.job_requeue == 0:
        return "JobRequeue=0 in the cluster's config"
    if part and part.preempt_mode and "CANCEL" in part.preempt_mode.upper().split(","):
        return f"partition {part.name} has PreemptMode=CANCEL (a preempted job is cancelled, not requeued)"
    return None


def requeue_hold_s(facts: ClusterFacts) -> int | None:
    """How long Slurm holds a requeued job before it may start again (None: the config was not read)."""
    if not facts.config_read:
        return None
    return (facts.cred_expire_s if facts.cred_expire_s is not None else DEFAULT_CRED_EXPIRE_S) + 1


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
    hold = requeue_hold_s(facts)
    if caps.chain and hold is not None and hold >= CHAIN_FROM_HOLD_S:
        return "chain", (
            f"a requeued job is held {hold} s here (cred_expire + 1), a chained successor is not; "
            "a refused successor falls back to scontrol requeue"
        )
    where = f"partition {part.name} PreemptMode={part.preempt_mode}" if part and part.preempt_mode else "no CANCEL"
    return "requeue", f"JobRequeue={facts.job_requeue}, {where}; {FALLBACK}"


def resolve_mode(spec: JobSpec, facts: ClusterFacts) -> tuple[JobSpec, str]:
    """The spec with its requeue mode decided (never auto), and why (pure)."""
    mode, why = pick(spec, facts)
    return dataclasses.replace(spec, requeue=dataclasses.replace(spec.requeue, mode=mode)), why
