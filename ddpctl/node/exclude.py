"""Never go back to a bad node: which node the run's next attempts must not use (pure).

After an attempt fails, the node blamed for it is read from the run's history:
- the decision's own cause and first-failed node (`Decided.cause`, `cause_node`: ddpctl.node.blame, which keeps
  the collateral errors of surviving ranks out);
- but for a hang, its culprits (the ranks that stopped first: silent ones, else the lowest step): when they all
  sit on one node that node is blamed ("hang"); a hang spread over several nodes blames none (excluding a
  healthy node costs the job a node and cures nothing);
- a decision recorded without a cause (an older ddpctl): the first node whose launcher failed on its own
  (`node-exit` with a status below 128, in the order recorded: srun's `--kill-on-bad-exit` and the local
  supervisor end the other nodes only after it), for an out-of-memory kill there ("oom") or else for the
  attempt's failure ("script-error").

Infrastructure causes (`INFRASTRUCTURE_CAUSES`: a hang, a lost node, a crashed rank, a failed node check) exclude
the node at once, but for a rank crashed by a signal its own code raised (`OWN_SIGNALS`: a segfault, an abort);
a setup error (the same on every node: ddpctl.node.blame) never excludes one. A crash by its own signal, and any
other cause,
excludes it once the same node was blamed for the same cause in two attempts of the run: a script that fails
only on one node is a bad node, not a bug, while a bug that fails on every node is blamed on whichever node
failed first, rarely the same one twice, and costs no node (nor does an unlucky draw: the bound below).

Bounded: the job must still fit its partition, so the excluded nodes (the user's own `--exclude` included) never
leave fewer free than the job's `nodes`; where the partition's size is unknown (no Slurm: the local backend, or
a controller that did not answer) at most `MAX_EXCLUDED_UNKNOWN` are excluded. An exclusion the bound stops is
recorded too, not applied, with the reason (`status` shows it).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from ddpctl.run.history import INFRASTRUCTURE_CAUSES, Attempt, Hung, NodeExcluded, NodeExited, OomKilled, RunHistory

REPEATS = 2  # any other cause: excluded once the same node failed this often for it
MAX_EXCLUDED_UNKNOWN = 4  # the cap where the partition's node count is unknown


@dataclass(frozen=True)
class Blame:
    node: str
    cause: str
    attempt: int
    own_signal: bool = False  # a rank-crash by a signal its own code raised: the node's only once it repeats


# Signals a process raises itself from the code it runs (a segfault in a C extension, an abort): a bug as likely
# as a bad node, so such a crash excludes its node only once it repeats there, as a script error does.
OWN_SIGNALS = frozenset(
    int(s) for s in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT, signal.SIGSYS)
)


@dataclass(frozen=True)
class Room:
    """How many nodes the job's partition has (None: unknown) and which the user excluded already."""

    partition: str | None = None
    total_nodes: int | None = None
    hosts: frozenset[str] | None = None  # the partition's nodes, where known: only those count against it
    given: frozenset[str] = frozenset()  # the spec's own sbatch `exclude`
    nodes: frozenset[str] | None = None  # the job's own nodes (its allocation), where known


# Slurm's node names are host names: what a run-dir file names otherwise (a comma, a bracket: a hostlist of many
# nodes) must never reach ExcNodeList, where one "name" would exclude nodes the bound never counted.
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def not_a_node(node: str, room: Room) -> str | None:
    """Why `node` (read from the run dir: the job can write there) cannot be excluded (None: it can)."""
    if not NODE_NAME.fullmatch(node):
        return f"{node!r:.80} is not a node name (letters, digits, '.', '-', '_'; at most 64)"
    if room.nodes is not None and node not in room.nodes:
        return f"{node} is not one of the job's nodes"
    return None


def blame(attempt: Attempt) -> Blame | None:
    """The node the attempt's failure is blamed on, and for what; None when no one node can be blamed."""
    decision = attempt.decision
    if decision is None or decision.kind not in ("failure", "node_failure") or decision.cause == "setup-error":
        return None  # completed, stopped, preempted: nobody failed; a setup error fails alike on every node
    hang = attempt.last(Hung)
    if decision.cause == "hang" or (decision.cause is None and hang is not None):
        nodes = {str(c.get("node")) for c in (hang.culprits if hang else ()) if c.get("node") not in (None, "", "?")}
        return Blame(nodes.pop(), "hang", attempt.number) if len(nodes) == 1 else None
    if decision.cause is not None:  # the decision's own cause (ddpctl.node.blame): its first-failed node or none
        if not decision.cause_node:
            return None
        own = decision.cause == "rank-crash" and crash_signal(attempt, decision.cause_rank) in OWN_SIGNALS
        return Blame(decision.cause_node, decision.cause, attempt.number, own_signal=own)
    # A decision recorded without a cause (an older ddpctl): the first node that failed on its own.
    first = next((e for e in attempt.all(NodeExited) if e.exit is not None and 0 < e.exit < 128), None)
    if first is None:
        return None
    oom = any(e.node == first.node and e.kills > 0 for e in attempt.all(OomKilled))
    return Blame(first.node, "oom" if oom else "script-error", attempt.number)


def crash_signal(attempt: Attempt, rank: int | None) -> int | None:
    """The signal that killed `rank` in the attempt, as torchrun reported it (exit code -N); None if unknown."""
    for event in attempt.all(NodeExited):
        for failed in event.failed:
            code = failed.get("exitcode")
            if failed.get("rank") == rank and isinstance(code, int) and not isinstance(code, bool) and code < 0:
                return -code
    return None


def repeats(past: RunHistory, wanted: Blame) -> int:
    """In how many of the run's attempts up to `wanted`'s the same node was blamed for the same cause."""
    found = (blame(past.attempt(n)) for n in past.attempts if n <= wanted.attempt)
    return sum(1 for b in found if b is not None and (b.node, b.cause) == (wanted.node, wanted.cause))


@dataclass(frozen=True)
class Candidate:
    blame: Blame
    times: int  # in how many of the run's attempts this node was blamed for this cause


def candidate(past: RunHistory, attempt: int, given: frozenset[str] = frozenset()) -> Candidate | None:
    """The node `attempt`'s failure (its decision already in `past`) calls to exclude; None: nobody is blamed,
    the cause is not an infrastructure one and has not repeated, or the node is excluded already."""
    found = blame(past.attempt(attempt))
    if found is None or found.node in past.excluded_nodes() | given:
        return None
    times = repeats(past, found)
    if (found.cause not in INFRASTRUCTURE_CAUSES or found.own_signal) and times < REPEATS:
        return None
    return Candidate(found, times)


def exclusion(past: RunHistory, wanted: Candidate, nodes_needed: int, room: Room) -> NodeExcluded:
    """The `node-excluded` event for `wanted`: applied, or stopped by the bound and saying why."""
    node, cause = wanted.blame.node, wanted.blame.cause
    times = f" in {wanted.times} attempts" if wanted.times > 1 else ""
    if (foreign := not_a_node(node, room)) is not None:
        why = f"{cause}{times}; not excluded: {foreign}"
        return NodeExcluded(attempt=wanted.blame.attempt, node=node[:80], cause=cause, applied=False, why=why)
    why = f"{cause} on {node}{times}"
    stopped = bound(past.excluded_nodes() | room.given, node, nodes_needed, room)
    attempt = wanted.blame.attempt
    if stopped:
        return NodeExcluded(attempt=attempt, node=node, cause=cause, applied=False, why=f"{why}; {stopped}")
    return NodeExcluded(attempt=attempt, node=node, cause=cause, why=why)


def bound(excluded: frozenset[str], node: str, nodes_needed: int, room: Room) -> str | None:
    """Why excluding `node` too would be one too many (None: it fits)."""
    counted = excluded | {node}
    if room.hosts is not None:
        counted = counted & room.hosts
    if room.total_nodes is None:
        if len(counted) > MAX_EXCLUDED_UNKNOWN:
            return f"not excluded: at most {MAX_EXCLUDED_UNKNOWN} nodes where the partition's size is unknown"
        return None
    if room.total_nodes - len(counted) < nodes_needed:
        where = f"partition {room.partition}" if room.partition else "the partition"
        return (
            f"not excluded: {where} has {room.total_nodes} nodes, the job needs {nodes_needed} and "
            f"{len(counted) - 1} are excluded already"
        )
    return None


def excluded_list(past: RunHistory, given: frozenset[str]) -> list[str]:
    """Every node the next attempt must avoid, the user's own first: the value of `ExcNodeList`/`--exclude`
    (either replaces the job's list, so the user's part is merged in)."""
    found = {node for node in past.excluded_nodes() - given if NODE_NAME.fullmatch(node)}  # see NODE_NAME
    return sorted(given) + sorted(found)


def given_excluded(sbatch_options: tuple[tuple[str, str | bool | int], ...]) -> frozenset[str]:
    """The spec's own `sbatch: {exclude: ...}` as node names (sbatch also reads `exclud`; `exclu` and shorter
    are ambiguous with `--exclusive`). A hostlist expression is expanded."""
    from ddpctl.slurm.hostlist import expand

    names: set[str] = set()
    for key, value in sbatch_options:
        if key in ("exclude", "exclud") and isinstance(value, str):
            try:
                names.update(expand(value))
            except ValueError:
                names.update(v for v in value.split(",") if v)
    return frozenset(names)


def describe(past: RunHistory) -> list[str]:
    """`status`'s lines: the nodes the run excluded and those the bound kept in, with why (untrusted text: the
    caller makes it visible)."""
    applied = [e for e in past.exclusions() if e.applied]
    kept = [e for e in past.exclusions() if not e.applied]
    out = []
    if applied:
        out.append("excluded nodes: " + ", ".join(f"{e.node} ({e.why}, after attempt {e.attempt})" for e in applied))
    out += [f"node {e.node} kept after attempt {e.attempt}: {e.why}" for e in kept]
    return out
