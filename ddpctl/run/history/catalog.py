"""Every event type by its on-disk name, and reading one parsed line back as its typed event (pure)."""

from __future__ import annotations

from ddpctl.run.history.base import Event
from ddpctl.run.history.events import (
    AttemptStarted,
    Cancelled,
    ChainDropped,
    ChainSubmitted,
    CheckpointSkipped,
    Decided,
    Launched,
    RequeueModeChosen,
    Resumed,
    Signalled,
    SpareRestarted,
    StopKilled,
    Stopped,
    StopScanned,
    StopSignalled,
    StopUnacknowledged,
    Submitted,
)
from ddpctl.run.history.failures import (
    Hung,
    NodeChecked,
    NodeExcluded,
    NodeExited,
    NodeLost,
    OomKilled,
    RankExited,
    StragglerFlagged,
)
from ddpctl.run.history.typed import build_event

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
        NodeChecked,
        StragglerFlagged,
        Decided,
        Cancelled,
        ChainSubmitted,
        ChainDropped,
        SpareRestarted,
        NodeExcluded,
    )
}


def parse_event(record: object) -> Event | None:
    """The typed event of one parsed JSON line; None for anything this ddpctl does not know or cannot trust."""
    if not isinstance(record, dict):
        return None
    name = record.get("event")
    cls = TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        return None
    return build_event(cls, record)
