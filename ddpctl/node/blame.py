"""What ended an attempt, and which node and rank failed first (pure): the `cause` of its decision.

Only from what the node side already recorded: the stopped marker, the hang watchdog's event, each launcher's
`node-exit` (with the ranks torchrun reported failed, by exit status or signal), its OOM-kill count, and each
failed rank's own `rank-exit` (its exception, and whether that was collateral). The first rule that matches:

  1. stop: the ranks agreed on a stop step and wrote its checkpoint.
  1b. stop-timeout: a stop nobody acknowledged, and the attempt was killed after the lead time (the local
     backend's `stop-killed`; on Slurm, ranks killed by a signal after `stop-unacknowledged`).
  2. node-lost: a node was recorded lost (`Facts.lost`).
  2b. preflight, node-check: a node's check failed before torchrun (`preflight_blame` says which node, where
     it can tell), or during training (ddpctl.node.recheck: that node, in its check's words).
  3. hang: the hang watchdog ended the attempt (its first culprit named).
  4. a rank killed by a signal of its own (torchrun's SIGTERM to the survivors is collateral): `oom` where its
     node counted an OOM kill and the signal is SIGKILL, else `rank-crash`; the earliest one torchrun noticed.
  5. oom: the OOM killer struck, but no rank's death was reported (torchrun's report is missing).
  6. script-error: a rank's own error (an exception that is not collateral, or a non-zero exit), earliest first;
     setup-error where that error is one of the job's setup (`torchreport.is_setup_error`: NCCL invalid usage, a
     duplicate GPU, a missing module): it fails alike on every node, so it blames none (ddpctl.node.exclude).
  7. only collateral errors (every failed rank saw a peer go): `node-lost` when a node launched but never
     recorded its exit (it vanished with its launcher), else `rank-crash` (a peer died without a record).
  8. a failed step with no record at all: script-error, saying that nothing tells more.
Collateral NCCL/Gloo errors of the surviving ranks therefore never headline while any rank died of its own.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ddpctl import exitcodes
from ddpctl.node.torchreport import is_setup_error
from ddpctl.run.history import (
    INFRASTRUCTURE_CAUSES,
    Attempt,
    Cause,
    Hung,
    Launched,
    NodeChecked,
    NodeExited,
    NodeLost,
    NodeRechecked,
    OomKilled,
    RankExited,
    StopKilled,
    Stopped,
    StopUnacknowledged,
)

SIGTERM = -int(signal.SIGTERM)  # torchrun's own exit status of a worker it stopped
SIGKILL = -int(signal.SIGKILL)
WHY_MAX = 300
# A check that failed on the node itself, before the network (`start`: it ended without a result on its own;
# `timeout`: it outlived its bound; one ended by a signal, srun's after another node failed, is no evidence).
LOCAL_STAGES = ("site", "hardware", "python", "gpu", "start", "timeout")


@dataclass(frozen=True)
class Blame:
    cause: Cause
    node: str | None = None
    rank: int | None = None
    why: str = ""
    at: str = ""  # where it failed, for telling a repeat (ddpctl.node.decide): a hang's place; else `why`

    @property
    def place(self) -> str:
        return self.at or self.why

    @property
    def infrastructure(self) -> bool:
        """Charged to requeue.max_node_failures: not the script's doing (a lost node, a hang, a killed rank)."""
        return self.cause in INFRASTRUCTURE_CAUSES


@dataclass(frozen=True)
class Death:
    """One rank's end: from torchrun's report (`exitcode` -N: signal N) or from the worker itself."""

    node: str | None
    rank: int | None
    exitcode: int
    t: float | None = None
    error: str = ""  # the worker's own last error line
    collateral: bool = False


@dataclass(frozen=True)
class Facts:
    exit_code: int  # the step's
    stopped: bool = False
    stop_step: int | None = None
    stop: Stopped | None = None  # the stop event (its source and checkpoint: the decision's words)
    lost: tuple[tuple[str | None, str], ...] = ()  # (node, why) of nodes recorded lost (None: which one is unknown)
    hang: Hung | None = None
    hang_reported: bool = False  # a launcher recorded that its node hung (its node-exit), with or without the hang
    oom_nodes: tuple[str, ...] = ()
    reported: tuple[Death, ...] = ()  # torchrun's failure reports, all nodes
    own: tuple[Death, ...] = ()  # workers' own rank-exit records
    silent_nodes: tuple[str, ...] = ()  # launched but no node-exit recorded
    checks: tuple[NodeChecked, ...] = ()  # the nodes' preflight checks (`ddpctl.node.nodecheck`)
    rechecks: tuple[NodeRechecked, ...] = ()  # the nodes' failed checks during training (`ddpctl.node.recheck`)
    stop_killed: str | None = None  # the local backend killed it after an unacknowledged stop: what was lost
    stop_unacknowledged: bool = False  # a stop's lead time ran out with no rank acknowledging it
    launcher_error: str = ""  # the last error a launcher printed to the batch output (`last_error`)


def blame(facts: Facts) -> Blame | None:
    """The cause of the attempt's end (module docstring); None: it completed."""
    if facts.stopped:
        return Blame("stop", why=stop_why(facts.stop, facts.stop_step))
    if facts.exit_code == exitcodes.OK:
        return None
    said = f"its launcher said: {facts.launcher_error}" if facts.launcher_error else "no rank recorded why"
    nothing = Blame("script-error", why=f"the step exited {facts.exit_code}; {said}")
    found = infra_blame(facts) or stop_timeout_blame(facts) or signal_blame(facts) or error_blame(facts)
    return found or collateral_blame(facts) or nothing


def infra_blame(facts: Facts) -> Blame | None:
    """Rules 2 to 3: a lost node, a failed check (before torchrun or during training), a hang."""
    if facts.lost:
        return Blame("node-lost", facts.lost[0][0], None, facts.lost[0][1])
    if any(not check.passed for check in facts.checks):
        return preflight_blame(facts.checks)
    if first := next(iter(facts.rechecks), None):
        return Blame("node-check", first.node, None, clip(f"{first.stage}: {first.why}"))
    return hang_blame(facts.hang) if facts.hang is not None or facts.hang_reported else None


def stop_why(stop: Stopped | None, step: int | None) -> str:
    """What the stop saved. A script's own clean exit (source "script") saved a checkpoint only if the newest
    file of its checkpoint directory is newer than the stop request (stopped.json's times, ddpctl.node.scriptstop)."""
    if stop is None or stop.source != "script":
        at = f" at step {step}" if step is not None else ""
        return f"the ranks agreed on a stop{at} and saved its checkpoint"
    saved, asked = stop.checkpoint_mtime, stop.signal_time
    if stop.checkpoint and saved is not None and asked is not None and saved >= asked - 0.02:
        return f"the script saved {stop.checkpoint} after the stop request and exited cleanly"
    newest = f" (its newest, {stop.checkpoint}, is older)" if stop.checkpoint else ""
    return f"the script exited cleanly after the stop request without saving a checkpoint{newest}"


def stop_timeout_blame(facts: Facts) -> Blame | None:
    """Rule 1b: the attempt ended because its stop went unacknowledged past the lead time and it was killed."""
    head = "no rank acknowledged the stop within the lead time"
    if facts.stop_killed is not None:
        return Blame("stop-timeout", why=clip(f"{head}: the local backend killed the attempt; {facts.stop_killed}"))
    if facts.stop_unacknowledged and error_blame(facts) is None:
        return Blame("stop-timeout", why=f"{head}: the ranks were killed at the end of the grace time")
    return None


def signal_blame(facts: Facts) -> Blame | None:
    """Rules 4 and 5: a rank killed by a signal of its own, or the OOM killer."""
    signalled = earliest(d for d in facts.reported if d.exitcode < 0 and d.exitcode != SIGTERM)
    if signalled is not None:
        name = signal_name(-signalled.exitcode)
        if signalled.exitcode == SIGKILL and signalled.node in facts.oom_nodes:
            return Blame("oom", signalled.node, signalled.rank, f"killed by {name} by the kernel's OOM killer")
        return Blame("rank-crash", signalled.node, signalled.rank, f"killed by {name}")
    if facts.oom_nodes:
        return Blame("oom", facts.oom_nodes[0], None, "the kernel's OOM killer ended a process of this node")
    return None


def error_blame(facts: Facts) -> Blame | None:
    """Rule 6: a rank's own error, from its worker or else from torchrun's report."""
    own = earliest(d for d in facts.own if not d.collateral)
    if own is not None:
        cause: Cause = "setup-error" if is_setup_error(own.error) else "script-error"
        return Blame(cause, own.node, own.rank, clip(own.error or f"exited with status {own.exitcode}"))
    explained = {d.rank for d in facts.own}
    unexplained = earliest(d for d in facts.reported if d.exitcode > 0 and d.rank not in explained)
    if unexplained is not None:
        why = f"exited with status {unexplained.exitcode}, as its launcher reported"
        return Blame("script-error", unexplained.node, unexplained.rank, why)
    return None


def collateral_blame(facts: Facts) -> Blame | None:
    """Rule 7: only the survivors' errors are recorded: the node that vanished, or a peer that died silently."""
    collateral = earliest(facts.own)
    seen = f"; rank {collateral.rank} saw: {collateral.error}" if collateral is not None else ""
    if facts.silent_nodes:
        return Blame("node-lost", facts.silent_nodes[0], None, clip(f"its launcher recorded no exit{seen}"))
    if collateral is None:
        return None
    return Blame("rank-crash", None, None, clip(f"a peer died without a record{seen}"))


def preflight_blame(checks: tuple[NodeChecked, ...]) -> Blame:
    """Which node failed its check. Its own failure (torch, its GPUs) names it, unless every node failed so: then
    it is the job's setup, not a node. For the network, node 0 serves the store the others connect to: the nodes
    that could not reach it while another could are at fault; node 0 is, when none of two or more could. Two
    nodes that cannot reach each other cannot tell whose link is down: nobody is blamed then."""
    failed = [c for c in checks if not c.ok]
    local = [c for c in failed if c.stage in LOCAL_STAGES]
    if local and len(local) < len(checks):
        return check_blame(local[0], local[0].why)
    others = [c for c in checks if c.node_rank != 0]
    unreached = [c for c in others if c.reached is False]  # failed to, or was still trying when it ended
    if unreached and len(unreached) < len(others):
        return check_blame(unreached[0], unreached[0].why)
    if len(unreached) >= 2:
        host = next((c for c in checks if c.node_rank == 0), None)
        why = f"none of the {len(unreached)} other nodes could reach its store: {unreached[0].why}"
        return Blame("preflight", host.node if host is not None else None, None, clip(why))
    first = (local or failed or list(checks))[0]
    everyone = " on every node" if local else ""
    return Blame("preflight", None, None, clip(f"{first.stage}{everyone}: {first.why}; no one node is to blame"))


def check_blame(check: NodeChecked, why: str) -> Blame:
    return Blame("preflight", check.node, None, clip(f"{check.stage}: {why}"))


def hang_blame(event: Hung | None) -> Blame:
    first = event.culprits[0] if event is not None and event.culprits else {}
    rank, node = first.get("rank"), first.get("node")
    idle = f"no progress for {event.idle_s} s" if event is not None and event.idle_s is not None else "no progress"
    where = f" at step {first.get('step')}: {first.get('where')}" if first else ""
    collective = f"{event.collective}; " if event is not None and event.collective else ""
    why = clip(f"{collective}{idle}; stopped first{where}" if first else f"{collective}{idle}")
    at = clip(f"{first.get('where')}") if first.get("where") else ""
    return Blame("hang", str(node) if node is not None else None, whole(rank), why, at=at)


def earliest(deaths: Iterable[Death]) -> Death | None:
    """The death with the earliest time (untimed last), then the lowest rank: a stable answer."""
    found = sorted(deaths, key=lambda d: (d.t is None, d.t or 0.0, d.rank if d.rank is not None else 1 << 30))
    return found[0] if found else None


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def clip(text: str) -> str:
    return text if len(text) <= WHY_MAX else text[: WHY_MAX - 3] + "..."


def facts_of(attempt: Attempt, exit_code: int, stopped: bool) -> Facts:
    """An attempt's facts from its events alone (ddpctl.run.markers turned its markers into events)."""
    exits = attempt.all(NodeExited)
    exited = {e.node for e in exits}
    stop, killed = attempt.last(Stopped), attempt.first(StopKilled)
    return Facts(
        exit_code=exit_code,
        stopped=stopped,
        stop_step=stop.step if stop is not None else None,
        stop=stop,
        lost=tuple(lost_node(e, attempt.all(Launched)) for e in attempt.all(NodeLost)),
        hang=attempt.first(Hung),
        hang_reported=any(e.hang for e in exits),
        oom_nodes=tuple(e.node for e in attempt.all(OomKilled) if e.kills),
        reported=tuple(d for e in exits for d in reported_deaths(e)),
        own=tuple(
            Death(e.node, e.rank, e.status if e.status is not None else 1, e.t, e.error, e.collateral)
            for e in attempt.all(RankExited)
        ),
        silent_nodes=tuple(dict.fromkeys(e.node for e in attempt.all(Launched) if e.node not in exited)),
        checks=tuple(attempt.all(NodeChecked)),
        rechecks=tuple(e for e in attempt.all(NodeRechecked) if e.failed),
        stop_killed=killed.lost or "work since the last checkpoint is lost" if killed is not None else None,
        stop_unacknowledged=attempt.first(StopUnacknowledged) is not None,
    )


def lost_node(event: NodeLost, launched: Sequence[Launched]) -> tuple[str | None, str]:
    """(host, why) of a lost node. A node that never wrote a heartbeat is named by its node rank only: its host
    is the one that launched as that rank, if any did; else None with the rank in `why`. Never the words
    "node rank N" as a host: the blamed host goes into Slurm's ExcNodeList, which refuses an unknown name."""
    if event.node:
        return event.node, event.why
    hosts = {e.node for e in launched if isinstance(e.dist, Mapping) and e.dist.get("NODE_RANK") == event.node_rank}
    if event.node_rank is not None and len(hosts) == 1:
        return hosts.pop(), event.why
    rank = f"node rank {event.node_rank}: " if event.node_rank is not None else ""
    return None, f"{rank}{event.why}"


def whole(value: object) -> int | None:
    """An integer from an untrusted record (never a bool); None otherwise."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reported_deaths(event: NodeExited) -> list[Death]:
    out = []
    for entry in event.failed:
        code, t = whole(entry.get("exitcode")), entry.get("t")
        if code:  # else untrusted and malformed: it tells nothing
            seen = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
            out.append(Death(event.node, whole(entry.get("rank")), code, seen))
    return out
