"""The run's history: events.jsonl, its event types (`base`, the lifecycle's `events`, the unplanned `failures`,
read back by `catalog`), reading and appending it (`log`), and every
question asked of a run (`RunHistory`: attempts and what ended them, stops, requeues and budgets used per kind,
chain jobs, excluded nodes, outcome).

Writers append one typed event: `history.append(layout.events, Decided(attempt=..., action=...))`. Readers ask
`history.load(layout.events)` once per question (a decision, a state poll) and the returned `RunHistory` what
they want to know; nothing else parses events.jsonl or compares event names.
"""

from ddpctl.run.history.base import CAUSES, INFRASTRUCTURE_CAUSES, KINDS, SIGNAL_KINDS, Action, Cause, Event, Kind
from ddpctl.run.history.catalog import TYPES, parse_event
from ddpctl.run.history.events import (
    AttemptStarted,
    Cancelled,
    ChainDropped,
    ChainSubmitted,
    CheckpointSkipped,
    Decided,
    Launched,
    NotifyFailed,
    RequeueModeChosen,
    Resumed,
    ResumePoint,
    ScratchRestart,
    Signalled,
    SpareRestarted,
    StopKilled,
    Stopped,
    StopScanned,
    StopSignalled,
    StopUnacknowledged,
    Submitted,
    WatchFound,
)
from ddpctl.run.history.failures import (
    HEALTH,
    HealthEvent,
    Hung,
    NodeChecked,
    NodeExcluded,
    NodeExited,
    NodeLost,
    OomKilled,
    RankExited,
    StragglerFlagged,
)
from ddpctl.run.history.log import EventLog, append, load, log_of
from ddpctl.run.history.runhistory import Attempt, RunHistory

__all__ = [
    "CAUSES",
    "HEALTH",
    "INFRASTRUCTURE_CAUSES",
    "KINDS",
    "SIGNAL_KINDS",
    "TYPES",
    "Action",
    "Attempt",
    "AttemptStarted",
    "Cancelled",
    "Cause",
    "ChainDropped",
    "ChainSubmitted",
    "CheckpointSkipped",
    "Decided",
    "Event",
    "EventLog",
    "HealthEvent",
    "Hung",
    "Kind",
    "Launched",
    "NodeChecked",
    "NodeExcluded",
    "NodeExited",
    "NodeLost",
    "NotifyFailed",
    "OomKilled",
    "RankExited",
    "RequeueModeChosen",
    "ResumePoint",
    "Resumed",
    "RunHistory",
    "ScratchRestart",
    "Signalled",
    "SpareRestarted",
    "StopKilled",
    "StopScanned",
    "StopSignalled",
    "StopUnacknowledged",
    "Stopped",
    "StragglerFlagged",
    "Submitted",
    "WatchFound",
    "append",
    "load",
    "log_of",
    "parse_event",
]
