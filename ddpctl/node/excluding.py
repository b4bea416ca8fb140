"""Never go back to a bad node: the side effects around the pure decision in ddpctl.node.exclude.

After a failed attempt's `requeue` decision, `after_failure` asks the node's site for the room to exclude in
(only when a node is to be excluded; on Slurm one `scontrol show partition`: ddpctl.node.site), records the
`node-excluded` event and leaves the run's list in `excluded-nodes`. The next attempt then avoids those nodes on
every path:
- requeue: Slurm refuses ExcNodeList on a running job, so the batch shell asks `internal exclude` just after
  `scontrol requeue` (the job is pending then, still completing) and `update_job` sets it;
- chain: the successor is submitted with `--exclude` (ddpctl.node.chain);
- local: the supervisor names the simulated nodes past the excluded ones (ddpctl.node.localenv).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace

from ddpctl import safeio
from ddpctl.node import exclude
from ddpctl.node.site import node_site
from ddpctl.proc import Runner, run
from ddpctl.run import history
from ddpctl.run.history import NodeExcluded, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import run_spec
from ddpctl.slurm import commands
from ddpctl.slurm.env import job_hosts
from ddpctl.spec import JobSpec


def after_failure(
    layout: RunLayout, env: Mapping[str, str], past: RunHistory, attempt: int, spec: JobSpec, *, runner: Runner = run
) -> NodeExcluded | None:
    """Exclude the node `attempt`'s failure is blamed on, if any (`past` holds its decision)."""
    given = exclude.given_excluded(spec.sbatch)
    wanted = exclude.candidate(past, attempt, given)
    if wanted is None:
        return None
    room = node_site(env).room(env, given, runner)  # a partition asked of slurmctld, or the local nodes
    room = replace(room, nodes=job_hosts(env))  # a blamed node must be one of the job's own
    event = history.append(layout.events, exclude.exclusion(past, wanted, spec.nodes, room))
    if event.applied:
        nodes = exclude.excluded_list(RunHistory((*past.events, event)), given)
        safeio.write_text_atomic(layout.excluded_nodes, "".join(f"{n}\n" for n in nodes))
    verb = "excluded from the next attempts" if event.applied else "kept"
    print(f"ddpctl: node {event.node} {verb}: {event.why}", file=sys.stderr, flush=True)
    return event


def run_excluded(layout: RunLayout) -> list[str]:
    """Every node the run's next attempt must avoid (the user's own `exclude` first), from its history."""
    return exclude.excluded_list(history.load(layout.events), exclude.given_excluded(run_spec(layout).sbatch))


def update_job(layout: RunLayout, job_id: str, runner: Runner = run) -> list[str]:
    """Set the requeued (pending) job's ExcNodeList to the run's list; returns it (nothing to set: empty)."""
    nodes = run_excluded(layout)
    if nodes:
        commands.exclude_nodes(job_id, nodes, runner)
    return nodes
