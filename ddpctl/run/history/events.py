"""The run's lifecycle events: submitted, attempts started and launched, stops, resumes, decisions, chains (pure).

Records are untrusted (a run dir may be written by the job's own code, or by an older or newer ddpctl):
`catalog.parse_event` returns None for an unknown event name or a record without a required field of the right
type, and an optional field of the wrong type reads as its default. Nothing here raises on a record's content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddpctl.run.history.base import Action, Cause, Event, Kind
from ddpctl.run.history.typed import build_event


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
class ResumePoint(Event):
    """A script that keeps its own checkpoints (spec `resume:` or `checkpoint.pattern`): the newest complete one
    when the attempt started (node 0's launcher), and the resume arguments it was given for it."""

    NAME = "resume-point"
    attempt: int
    checkpoint: str | None = None  # None: no complete checkpoint of the spec's kind in checkpoint.dir
    step: int | None = None  # the step its name carries (None: the name has none)
    args: tuple[str, ...] = ()  # the resume arguments added to the script's (none: the script resumes itself)


@dataclass(frozen=True, kw_only=True)
class ScratchRestart(Event):
    """The attempt wrote a checkpoint of a step no later than the one that existed when it started: it trained
    from scratch (or from an older checkpoint) although step `step` was there to resume from."""

    NAME = "scratch-restart"
    attempt: int
    step: int  # the newest complete checkpoint's step at the attempt's start
    checkpoint: str | None = None
    wrote: str = ""  # the checkpoint it wrote since (name)
    wrote_step: int | None = None

    def text(self) -> str:
        return (
            f"attempt {self.attempt}: WARNING: restarted from scratch although step {self.step} existed "
            f"({self.checkpoint}): it wrote {self.wrote} (step {self.wrote_step}) after its start"
        )


@dataclass(frozen=True, kw_only=True)
class CheckpointRotated(Event):
    """The script's own checkpoint rotation deleted, during this attempt, an earlier attempt's checkpoint newer
    than everything the attempt wrote (HF `save_total_limit` after a restart from scratch): the furthest point to
    resume from is gone."""

    NAME = "checkpoint-rotated"
    attempt: int
    deleted: str  # the earlier attempt's checkpoint (name)
    deleted_step: int
    kept: str  # the attempt's own newest (name)
    kept_step: int | None = None

    def text(self) -> str:
        return (
            f"attempt {self.attempt}: WARNING: the script's checkpoint rotation deleted {self.deleted} (step "
            f"{self.deleted_step}, an earlier attempt's) while its own newest is {self.kept} (step {self.kept_step})"
        )


@dataclass(frozen=True, kw_only=True)
class CheckpointSkipped(Event):
    NAME = "checkpoint_skipped"
    step: int
    checkpoint: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Decided(Event):
    """The end-of-attempt decision: requeue (charged to `kind`) or finish the run with `exit_code`."""

    NAME = "decision"
    OMIT_NONE = frozenset({"cause", "cause_node", "cause_rank", "cause_why", "cause_step", "cause_at", "stalled"})
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
    # Where it failed, to tell a failure that repeats (ddpctl.node.decide): the step the attempt reached (None:
    # none, or unknown) and the place (the hang's function, the first error line, with addresses and pids dropped).
    cause_step: int | None = None
    cause_at: str | None = None
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
class SpareRestarted(Event):
    """The batch shell starts `next_attempt` inside job `job_id` on `nodes`, past the `avoided` ones
    (spare_nodes), instead of requeueing (ddpctl.node.spare)."""

    NAME = "spare-restart"
    attempt: int
    next_attempt: int
    job_id: str
    nodes: tuple[str, ...] = ()
    avoided: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ChainDropped(Event):
    NAME = "chain-drop"
    attempt: int
    job_id: str
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class NotifyFailed(Event):
    """A notification (spec `notify:`) that could not be sent, retry included (ddpctl.run.notifysend): recorded so
    that a lost one is seen in `status` and the report, never fatal to the run. `error` never holds the secret."""

    NAME = "notify-failed"
    attempt: int | None = None
    about: str = ""  # finish, failure, hang, node-lost, last-requeue
    channel: str = ""  # webhook, command, mail
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class WatchFound(Event):
    """What `ddpctl watch` (cron, a login-node loop) noticed that the job itself could not report: `vanished` (the
    scheduler says it ended, no decision was recorded) or `stalled` (no progress past its allowance while it
    runs). Recorded once per attempt and kind, so a later pass does not tell it again."""

    NAME = "watch-found"
    attempt: int | None = None
    kind: str = ""
    why: str = ""
