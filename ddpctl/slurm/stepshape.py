"""The shape of a job step, as far as one node's environment tells it (pure: callers pass the mapping).

`ddpctl launch` and `ddpctl env` need a step with exactly one task per node (NODE_RANK is the node's index, so
two tasks on a node would both claim it), over every node of the job, or of one component of a heterogeneous
job; and a process count per node that every node derives alike (WORLD_SIZE must agree everywhere).

Which variable says what (checked on Slurm 22.05, see tests/cluster/README.md):
- SLURM_STEP_TASKS_PER_NODE: the step's tasks on each node, compressed like `2(x2),1`; set by srun in every
  task. SLURM_NTASKS is the step's task count inside a step. SLURM_NTASKS_PER_NODE is NOT the step's: a step
  inherits the job's value (a job with --ntasks-per-node=2 shows 2 in an `srun -n3` step), so it is read only
  when neither step variable is there.
- A heterogeneous job: SLURM_HET_SIZE (older spelling SLURM_PACK_SIZE) components, each described by
  SLURM_JOB_NODELIST_HET_GROUP_<n> and SLURM_JOB_NUM_NODES_HET_GROUP_<n>. The unsuffixed SLURM_JOB_* describe
  component 0 in the batch shell; 22.05 rewrites them for an `srun --het-group=<n>` step, but a step must not
  depend on that (an environment that keeps component 0's count reads "2 of the job's 1 nodes"), so the
  component is found by the step's node list and its own _HET_GROUP_<n> list and count are used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ddpctl.errors import HostlistError, SlurmEnvError
from ddpctl.slurm.hostlist import expand

STEP_TASKS_PER_NODE = "SLURM_STEP_TASKS_PER_NODE"
STEP_NUM_TASKS = "SLURM_STEP_NUM_TASKS"
NTASKS = "SLURM_NTASKS"
NTASKS_PER_NODE = "SLURM_NTASKS_PER_NODE"
STEP_NUM_NODES = "SLURM_STEP_NUM_NODES"
STEP_NODELIST = "SLURM_STEP_NODELIST"
JOB_NODELIST = "SLURM_JOB_NODELIST"  # ddpctl.slurm.env, which imports this module, takes these from here
HET_SIZE = "SLURM_HET_SIZE"
PACK_SIZE = "SLURM_PACK_SIZE"  # Slurm < 20.02's name, still exported by 22.05
HET_NODELIST = "SLURM_JOB_NODELIST_HET_GROUP_{}"
HET_NUM_NODES = "SLURM_JOB_NUM_NODES_HET_GROUP_{}"
GPUS_PER_NODE = "SLURM_GPUS_PER_NODE"
GPUS_ON_NODE = "SLURM_GPUS_ON_NODE"

SHAPE_VARIABLES: dict[str, str] = {
    STEP_TASKS_PER_NODE: "the step's tasks per node, e.g. 1(x4); more than 1 anywhere is refused",
    STEP_NUM_TASKS: "the step's task count; more than its node count is refused",
    NTASKS: "inside a step: the step's task count (read when SLURM_STEP_NUM_TASKS is absent)",
    NTASKS_PER_NODE: "the job's --ntasks-per-node (a step inherits it): read only without the step variables",
    STEP_NODELIST: "the step's hosts; in a heterogeneous job it picks the component the step runs on",
    HET_SIZE: "components of a heterogeneous job (older spelling SLURM_PACK_SIZE)",
    "SLURM_JOB_NODELIST_HET_GROUP_<n>": "the hosts of component n of a heterogeneous job",
    "SLURM_JOB_NUM_NODES_HET_GROUP_<n>": "the node count of component n of a heterogeneous job",
    GPUS_PER_NODE: "the job's --gpus-per-node ([type:]count): the same on every node -> default processes",
}

ONE_TASK = "allowed: one task per node (srun --ntasks-per-node=1)"
_GROUP = re.compile(r"^(\d+)(?:\(x(\d+)\))?$")


def var(env: Mapping[str, str], name: str) -> str | None:
    """A Slurm variable's value, None when unset or blank (shared with ddpctl.slurm.env)."""
    return env.get(name, "").strip() or None


def count_var(env: Mapping[str, str], name: str) -> int | None:
    """A Slurm variable that must be a non-negative integer; None when unset (shared with ddpctl.slurm.env)."""
    value = var(env, name)
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()):
        raise SlurmEnvError(f"{name}={value!r} is not a non-negative integer")
    return int(value)


def tasks_per_node(text: str) -> list[int]:
    """Slurm's compressed per-node counts: `2(x3),1` -> [2, 2, 2, 1]; ValueError on anything else."""
    counts: list[int] = []
    for group in text.split(","):
        match = _GROUP.match(group.strip())
        if match is None:
            raise ValueError(group)
        count, repeat = int(match.group(1)), int(match.group(2) or 1)
        if repeat > 100_000:  # bounded work for any input
            raise ValueError(group)
        counts.extend([count] * repeat)
    return counts


def check_one_task_per_node(env: Mapping[str, str], step_nodes: int) -> None:
    """Refuse a step that runs more than one task on a node: every task there would get the same NODE_RANK."""
    raw = var(env, STEP_TASKS_PER_NODE)
    if raw is not None:
        try:
            counts = tasks_per_node(raw)
        except ValueError:
            raise SlurmEnvError(f"{STEP_TASKS_PER_NODE}={raw!r} is not a list of task counts like 1(x4)") from None
        if max(counts, default=1) > 1:
            raise SlurmEnvError(
                f"{STEP_TASKS_PER_NODE}={raw!r}: this step runs {max(counts)} tasks on a node, and they would all "
                f"get the same NODE_RANK; {ONE_TASK}"
            )
        return
    for name in (STEP_NUM_TASKS, NTASKS):
        tasks = count_var(env, name)
        if tasks is not None:
            if tasks > step_nodes:
                raise SlurmEnvError(
                    f"{name}={tasks}: this step runs {tasks} tasks on {step_nodes} node(s), so some tasks would "
                    f"share a NODE_RANK; {ONE_TASK}"
                )
            return
    per_node = count_var(env, NTASKS_PER_NODE)
    if per_node is not None and per_node > 1:
        raise SlurmEnvError(f"{NTASKS_PER_NODE}={per_node}: tasks on one node would share a NODE_RANK; {ONE_TASK}")


def het_size(env: Mapping[str, str]) -> int | None:
    """Components of a heterogeneous job (None: not one)."""
    size = count_var(env, HET_SIZE)
    return size if size is not None else count_var(env, PACK_SIZE)


def _hosts(name: str, text: str) -> tuple[str, ...]:
    try:
        return tuple(expand(text))
    except HostlistError as err:
        raise SlurmEnvError(f"{name}: {err}") from err


def het_component(env: Mapping[str, str], node_name: str | None) -> tuple[int, str, int] | None:
    """(component, its node list, its node count) of the heterogeneous job component this step runs on.

    None outside a heterogeneous job, and for a step over several components whose unsuffixed job variables
    describe exactly the step's nodes (22.05 sets them so for `srun --het-group=0,1`: one node list, one NODEID
    sequence); such a step is derived like any other. A step whose component cannot be told is refused.
    """
    size = het_size(env)
    if size is None or size < 2:
        return None
    step_list = var(env, STEP_NODELIST)
    step_hosts = set(_hosts(STEP_NODELIST, step_list)) if step_list else set()
    holding = []
    for index in range(min(size, 64)):
        node_list = var(env, HET_NODELIST.format(index))
        if node_list is None:
            continue
        hosts = set(_hosts(HET_NODELIST.format(index), node_list))
        if (step_hosts and step_hosts <= hosts) or (not step_hosts and node_name in hosts):
            count = count_var(env, HET_NUM_NODES.format(index))
            holding.append((index, node_list, len(hosts) if count is None else count))
    if len(holding) == 1:
        return holding[0]
    job_list = var(env, JOB_NODELIST)
    if step_hosts and job_list and set(_hosts(JOB_NODELIST, job_list)) == step_hosts:
        return None
    where = f"{STEP_NODELIST}={step_list!r}" if step_list else f"node {node_name!r}"
    raise SlurmEnvError(
        f"{HET_SIZE}={size}: cannot tell which component of this heterogeneous job the step runs on ({where}); "
        "allowed: a step over one component, e.g. srun --het-group=1 --ntasks-per-node=1"
    )


def gpus_per_node_request(env: Mapping[str, str]) -> int | None:
    """The job's --gpus-per-node as a count (`2`, `a100:2`, `a100:2,v100:1` -> 3); None when not asked for."""
    raw = var(env, GPUS_PER_NODE)
    if raw is None:
        return None
    total = 0
    for item in raw.split(","):
        count = item.rsplit(":", 1)[-1].strip()
        if not (count.isascii() and count.isdigit()):
            raise SlurmEnvError(f"{GPUS_PER_NODE}={raw!r} is not a GPU count like 4 or a100:4")
        total += int(count)
    return total


def default_nproc(env: Mapping[str, str], nnodes: int) -> int:
    """Processes per node when nothing names the number: one per GPU, counted so that every node of the step
    derives the same number (WORLD_SIZE = nodes x this must agree everywhere).

    The job's per-node request (SLURM_GPUS_PER_NODE) is the same on every node, so it is used. This node's
    own count (SLURM_GPUS_ON_NODE) is used only in a one-node step: with GPUs asked per job (--gpus=3 over two
    nodes) or per task, nodes can hold different numbers and none can tell from its environment, so that is
    refused. A node holding fewer GPUs than the request is refused too. No GPUs: 1.
    """
    request = gpus_per_node_request(env)
    on_node = count_var(env, GPUS_ON_NODE)
    if request:
        if on_node is not None and on_node != request:
            raise SlurmEnvError(
                f"{GPUS_ON_NODE}={on_node} on this node but the job asked for {GPUS_PER_NODE}={request}: "
                "pass --nproc-per-node N (the same on every node)"
            )
        return request
    if not on_node:
        return 1
    if nnodes == 1:
        return on_node
    raise SlurmEnvError(
        f"{GPUS_ON_NODE}={on_node} counts this node's GPUs only and the job asked for none per node "
        f"({GPUS_PER_NODE} unset), so the {nnodes} nodes may derive different WORLD_SIZEs; pass "
        "--nproc-per-node N (the same on every node), or request --gpus-per-node"
    )
