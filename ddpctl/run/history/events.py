"""Every event of a run's events.jsonl, declared once with its typed fields (pure: no file access here).

A line on disk is `{"t": ..., "event": NAME, field: value, ...}` with sorted keys, exactly what the field names
below say. Records are untrusted (a run dir may be written by the job's own code, or by an older or newer
ddpctl): `parse_event` returns None for an unknown event name or a record without a required field of the right type,
and an optional field of the wrong type reads as its default. Nothing here raises on a record's content.

Failure causes and budgets are typed here so that the next kinds (a node lost, a rank crash) are one entry each:
`Kind` is what a requeue is charged to (`spec.requeue.max_*`), `Cause` what ended an attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, TypeVar, get_args

from ddpctl.run.history.typed import build_event

# The budgets a requeue is charged to; node_failure: an infrastructure failure (a hang the watchdog ended; later
# a node lost, a rank crash), requeue.max_node_failures.
Kind = Literal["preemption", "timeout", "failure", "node_failure"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Action = Literal["requeue", "finish"]
# What ended an attempt (the failure model's causes); `Decided.cause` carries it where a writer knows it.
Cause = Literal["stop", "node-lost", "rank-crash", "oom", "hang", "script-error"]
CAUSES: tuple[Cause, ...] = get_args(Cause)
SIGNAL_KINDS: tuple[Kind, ...] = ("timeout", "preemption")  # what a warning/preemption signal can mean


@dataclass(frozen=True, kw_only=True)
class Event:
    NAME: ClassVar[str] = ""
    OMIT_NONE: ClassVar[frozenset[str]] = frozenset()  # fields not written at all while None

    t: float | None = None  # set when written (`log.append`), unless the writer dates it itself

    def as_json(self) -> dict[str, Any]:
        """The record as written to events.jsonl (and shown by `status --json`)."""
        out: dict[str, Any] = {"event": self.NAME}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None and field.name in self.OMIT_NONE:
                continue
            out[field.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, kw_only=True)
class Submitted(Event):
    NAME = "submit"
    job_id: str
    backend: str = ""
    spec: str = ""


@dataclass(frozen=True, kw_only=True)
class RequeueModeChosen(Event):
    NAME = "requeue-mode"
    mode: str
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class AttemptStarted(Event):
    NAME = "attempt-start"
    attempt: int
    job_id: str | None = None  # the job running this attempt (a chained successor has its own)
    nodes: str | None = None
    batch_host: str | None = None
    checkpoints_present: bool | None = None  # None: could not tell


@dataclass(frozen=True, kw_only=True)
class Launched(Event):
    NAME = "launch"
    node: str
    attempt: int
    dist: Mapping[str, Any] | None = None
    argv: tuple[str, ...] = ()
    gpus: tuple[Mapping[str, Any], ...] = ()
    cuda_visible_devices: str | None = None


@dataclass(frozen=True, kw_only=True)
class StopSignalled(Event):
    """A node's launcher received the stop signal."""

    NAME = "stop-signal"
    node: str
    attempt: int
    signal: str = ""


@dataclass(frozen=True, kw_only=True)
class Signalled(Event):
    """The batch shell (or the backend's lead) received the warning/preemption signal and classified it."""

    NAME = "signal"
    attempt: int
    signal: str = ""
    kind: str | None = None  # "timeout" or "preemption" from this ddpctl
    time_left_s: int | None = None


@dataclass(frozen=True, kw_only=True)
class Stopped(Event):
    """The ranks' agreed stop (or the script's own clean stop) after its checkpoint: stopped.json's record."""

    NAME = "stop"
    OMIT_NONE = frozenset({"world_size"})
    attempt: int
    step: int | None = None
    checkpoint: str | None = None
    signal_time: float | None = None
    source: str = ""
    world_size: int | None = None  # the agreed stop's
    checkpoint_mtime: float | None = None  # the script's own stop's

    @classmethod
    def from_marker(cls, record: Mapping[str, Any]) -> Stopped:
        """The event of a stopped.json record its writer just built (its `time` is the marker's own)."""
        event = build_event(cls, record)
        if event is None:
            raise ValueError(f"not a stop record: {record!r}")
        return event

    def as_json(self) -> dict[str, Any]:
        out = super().as_json()
        if self.source != "script":
            out.pop("checkpoint_mtime")
        return out


@dataclass(frozen=True, kw_only=True)
class StopUnacknowledged(Event):
    NAME = "stop-unacknowledged"
    OMIT_NONE = frozenset({"killed"})
    attempt: int
    waited_s: int | None = None  # None: found at the next attempt's start
    listeners: tuple[str, ...] = ()
    killed: bool | None = None  # True: Slurm killed the job before the lead time ran out


@dataclass(frozen=True, kw_only=True)
class StopKilled(Event):
    """The local backend killed an attempt whose stop nobody acknowledged within the lead time, as Slurm does
    at the end of the grace time; what was lost, as far as it can be known."""

    NAME = "stop-killed"
    attempt: int
    waited_s: float | None = None
    lost: str = ""  # the sentence status shows
    last_step: int | None = None  # the newest step a rank reported (runtime.Heartbeat)
    checkpoint_step: int | None = None  # the newest complete runtime.Checkpointer checkpoint
    checkpoint: str | None = None  # the newest file of the checkpoint directory
    checkpoint_age_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class StopScanned(Event):
    """What submit's static look at the script found: its warning, and whether the script can announce that its
    ranks listen for stops (ddpctl.runtime), so `preempt` knows whether waiting for a listener makes sense."""

    NAME = "stop-scan"
    warning: str | None = None
    announces: bool = True


@dataclass(frozen=True, kw_only=True)
class Resumed(Event):
    NAME = "resume"
    attempt: int
    step: int | None = None  # None: no complete checkpoint, restarted from scratch
    checkpoint: str | None = None


@dataclass(frozen=True, kw_only=True)
class CheckpointSkipped(Event):
    NAME = "checkpoint_skipped"
    step: int
    checkpoint: str = ""
    reason: str = ""


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


@dataclass(frozen=True, kw_only=True)
class NodeLost(Event):
    """A node's launcher found a peer node lost (ddpctl.health.peers): its heartbeat stopped, it never wrote one,
    or its ranks all went silent; every node then ended its torchrun."""

    NAME = "node-lost"
    attempt: int
    node: str | None = None  # None: the lost node never wrote a heartbeat that named it
    node_rank: int | None = None
    why: str = ""
    silent_s: float | None = None  # since its last sign of life, as the finding node measured it
    found_by: str | None = None  # the node whose launcher recorded it


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
class Decided(Event):
    """The end-of-attempt decision: requeue (charged to `kind`) or finish the run with `exit_code`."""

    NAME = "decision"
    OMIT_NONE = frozenset({"cause", "cause_node", "cause_rank", "cause_why", "stalled"})
    attempt: int
    action: Action
    kind: Kind | None = None
    reason: str = ""
    exit_code: int | None = None  # the batch script's own status
    step_exit: int | None = None
    stopped: bool | None = None
    cause: Cause | None = None  # what ended the attempt, where known (`ddpctl.node.blame`)
    cause_node: str | None = None  # the node and rank that failed first, where known
    cause_rank: int | None = None
    cause_why: str | None = None  # one line: "rank 3 killed by SIGKILL", the exception, the hang
    stalled: int | None = None  # failed attempts in a row, this one included, that saved no newer checkpoint

    def cause_text(self) -> str | None:
        """ "rank-crash: rank 1 on node2: killed by SIGKILL" (None: no cause recorded). Untrusted: sanitize it."""
        if self.cause is None:
            return None
        rank = f"rank {self.cause_rank}" if self.cause_rank is not None else ""
        where = " on ".join(x for x in (rank, self.cause_node or "") if x)
        return ": ".join(x for x in (self.cause, where, self.cause_why or "") if x)


@dataclass(frozen=True, kw_only=True)
class Cancelled(Event):
    NAME = "cancelled"
    attempt: int


@dataclass(frozen=True, kw_only=True)
class ChainSubmitted(Event):
    NAME = "chain-submit"
    attempt: int
    job_id: str
    predecessor: str | None = None
    next_attempt: int | None = None
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class ChainDropped(Event):
    NAME = "chain-drop"
    attempt: int
    job_id: str
    why: str = ""


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


HEALTH = (Hung, StragglerFlagged, OomKilled, NodeLost)
HealthEvent = Hung | StragglerFlagged | OomKilled | NodeLost
TYPES: dict[str, type[Event]] = {
    cls.NAME: cls
    for cls in (
        Submitted,
        RequeueModeChosen,
        AttemptStarted,
        Launched,
        StopSignalled,
        Signalled,
        Stopped,
        StopUnacknowledged,
        StopKilled,
        StopScanned,
        Resumed,
        CheckpointSkipped,
        NodeExited,
        RankExited,
        OomKilled,
        Hung,
        NodeLost,
        StragglerFlagged,
        Decided,
        Cancelled,
        ChainSubmitted,
        ChainDropped,
        NodeExcluded,
    )
}
E = TypeVar("E", bound=Event)


def parse_event(record: object) -> Event | None:
    """The typed event of one parsed JSON line; None for anything this ddpctl does not know or cannot trust."""
    if not isinstance(record, dict):
        return None
    name = record.get("event")
    cls = TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        return None
    return build_event(cls, record)
