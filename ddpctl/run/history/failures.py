"""What ends an attempt unplanned, and what the health checks found: node and rank exits, OOM kills, hangs, lost
nodes, stragglers, slowdowns and the nodes excluded for them (pure). `HEALTH` is what `status` shows as health lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpctl.run.history.base import Event


@dataclass(frozen=True, kw_only=True)
class NodeExited(Event):
    NAME = "node-exit"
    node: str
    attempt: int
    torchrun_exit: int | None = None
    exit: int | None = None  # the launcher's own status
    stopped: bool = False
    hang: bool = False
    # The ranks torchrun reported failed (its failure report): {"rank": r, "exitcode": -9 (a signal) or 1,
    # "t": when torchrun noticed}; what the decision blames a rank's death on (`ddpctl.node.blame`).
    failed: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class RankExited(Event):
    """A rank's worker ended with a non-zero status: its script's exception (the last line of its traceback),
    and whether that is a collateral error (a peer died: NCCL/Gloo, a refused or closed connection)."""

    NAME = "rank-exit"
    attempt: int
    rank: int
    node: str | None = None
    status: int | None = None
    error: str = ""
    collateral: bool = False


@dataclass(frozen=True, kw_only=True)
class OomKilled(Event):
    NAME = "oom"
    node: str
    attempt: int
    kills: int = 0
    limit_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class Hung(Event):
    NAME = "hang"
    attempt: int
    idle_s: float | None = None
    timeout_s: float | None = None
    allowance: str = ""
    culprits: tuple[Mapping[str, Any], ...] = ()
    ranks: Mapping[str, Any] | None = None
    nodes: tuple[Mapping[str, Any], ...] = ()  # the nodes whose ranks went silent or could not be dumped
    # From the ranks' flight-recorder dumps (ddpctl.health.collectives): "rank 3 never entered all_reduce #57
    # (the others wait in it)", and per rank its last entered and completed collective.
    collective: str = ""
    collectives: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class NodeLost(Event):
    """A node's launcher found a peer node lost (ddpctl.health.peers): its heartbeat stopped, it never wrote one,
    or it was cut off from the others' network; every node then ended its torchrun."""

    NAME = "node-lost"
    attempt: int
    node: str | None = None  # None: the lost node never wrote a heartbeat that named it
    node_rank: int | None = None
    why: str = ""
    silent_s: float | None = None  # since its last sign of life, as the finding node measured it
    found_by: str | None = None  # the node whose launcher recorded it


@dataclass(frozen=True, kw_only=True)
class NodeChecked(Event):
    """A node's preflight check before torchrun (ddpctl.node.nodecheck): `ok` its own verdict, `stage` where it
    failed (site, hardware, python, gpu, reach, join, allreduce, start), `reached` whether it got to node 0's
    store, `peers_ok` what the all-reduce said of every node (None: not that far, or one node)."""

    NAME = "preflight"
    attempt: int
    node: str
    node_rank: int
    ok: bool
    stage: str = ""
    why: str = ""
    reached: bool | None = None
    peers_ok: bool | None = None
    seconds: float | None = None
    output: tuple[str, ...] = ()  # the site's node check's last lines (`health.node_check`)

    @property
    def passed(self) -> bool:
        """Training may start on this node: it passed, and no node reported a failure."""
        return self.ok and self.peers_ok is not False


@dataclass(frozen=True, kw_only=True)
class NodeRechecked(Event):
    """A node's check during training (`health.node_check_every_min`, ddpctl.node.recheck), recorded only when it
    said something: `failed` True ended the attempt, blaming the node (cause `node-check`); False: the check could
    not be run (the site's command could not start) and counts as no verdict. `stage`: site, hardware, timeout
    (the check outlived its bound and was killed) or start; `step`: the newest step the node's ranks recorded."""

    NAME = "node-check"
    attempt: int
    node: str
    node_rank: int
    failed: bool
    stage: str = ""
    why: str = ""
    seconds: float | None = None
    step: int | None = None
    output: tuple[str, ...] = ()  # the site's node check's last lines


@dataclass(frozen=True, kw_only=True)
class StragglerFlagged(Event):
    NAME = "straggler"
    attempt: int
    rank: int
    node: str | None = None
    busy_s: float | None = None
    median_s: float | None = None
    factor: float | None = None
    threshold: float | None = None
    steps: int | None = None


@dataclass(frozen=True, kw_only=True)
class SlowedDown(Event):
    """A node whose step time stayed well above its own earlier pace or the other nodes' for minutes
    (ddpctl.health.slowdown); told once per node and attempt, never fatal."""

    NAME = "slowdown"
    attempt: int
    node: str
    step_s: float | None = None  # the node's busy (or step) time a step when found
    baseline_s: float | None = None  # its own earlier pace
    run_s: float | None = None  # the other nodes' median then
    versus: str = ""  # what it was slow against
    factor: float | None = None
    threshold: float | None = None
    sustained_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class NodeExcluded(Event):
    """A node the run's later attempts must not use (ddpctl.node.exclude decided it after `attempt`); `applied`
    False: the bound (the job must still fit its partition) kept it in, `why` says so."""

    NAME = "node-excluded"
    attempt: int
    node: str
    cause: str = ""  # what it was blamed for: a Cause ("hang", "script-error", ...)
    applied: bool = True
    why: str = ""


HEALTH = (Hung, StragglerFlagged, OomKilled, NodeLost, SlowedDown, NodeRechecked)
HealthEvent = Hung | StragglerFlagged | OomKilled | NodeLost | SlowedDown | NodeRechecked
