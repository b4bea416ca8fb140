"""Restart inside the allocation (`spare_nodes`): after an attempt that failed, the batch shell starts the next
attempt as a new step on `nodes` healthy nodes of its own allocation instead of going back to the queue.

`choose` decides (pure); `restart_here` is the one edge: it reads the run's history and the job's nodes, records
the choice (the `spare-restart` event, then the shell's counter file) and returns the nodes for `srun --nodelist`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ddpctl import safeio
from ddpctl.errors import HostlistError
from ddpctl.node.batch import attempt_of
from ddpctl.run import history
from ddpctl.run.history import SpareRestarted
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import run_spec
from ddpctl.slurm import stepshape
from ddpctl.slurm.env import ALLOC_RESTARTS, JOB_ID
from ddpctl.slurm.hostlist import compress, expand

# A stop (preemption, the time limit) ends the allocation itself: only a failure restarts inside it.
RESTART_KINDS = ("failure", "node_failure")


def choose(allocation: Sequence[str], avoid: Collection[str], nodes: int) -> tuple[str, ...] | None:
    """The first `nodes` of the allocation's nodes, in Slurm's order, that the run does not avoid; None when too
    few are left (the run goes back to the queue with the bad nodes excluded)."""
    healthy = [node for node in allocation if node not in avoid]
    return tuple(healthy[:nodes]) if len(healthy) >= nodes else None


def restart_here(layout: RunLayout, env: Mapping[str, str]) -> str:
    """The hostlist of the next attempt's step inside this job, recorded; "" to requeue as without spares."""
    spec = run_spec(layout)
    past = history.load(layout.events)
    attempt = attempt_of(env)
    this = past.attempt(attempt)
    decided = this.decision
    if not spec.spare_nodes or decided is None or decided.action != "requeue" or decided.kind not in RESTART_KINDS:
        return ""
    if this.signal is not None:  # a stop came too (preemption, the time limit): the allocation itself is ending
        return ""
    try:
        allocation = expand(stepshape.var(env, stepshape.JOB_NODELIST) or "")
    except HostlistError:
        return ""
    # Every node the run blamed, applied or kept in by the partition bound: a spare is there to avoid it.
    avoid = {e.node for e in past.exclusions()} | ({decided.cause_node} if decided.cause_node else set())
    chosen = choose(allocation, avoid, spec.nodes)
    job_id = env.get(JOB_ID, "")
    if chosen is None or not job_id:
        return ""
    history.append(
        layout.events,
        SpareRestarted(
            attempt=attempt,
            next_attempt=attempt + 1,
            job_id=job_id,
            nodes=chosen,
            avoided=tuple(sorted(avoid & set(allocation))),
        ),
    )
    count = (stepshape.count_var(env, ALLOC_RESTARTS) or 0) + 1
    safeio.write_text_atomic(layout.spare_restarts(job_id), f"{count}\n")
    return compress(list(chosen))
