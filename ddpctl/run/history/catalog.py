"""Every event type by its on-disk name, and reading one parsed line back as its typed event (pure)."""

from __future__ import annotations

from types import ModuleType

from ddpctl.run.history import events, failures
from ddpctl.run.history.base import Event
from ddpctl.run.history.typed import build_event


def _defined_in(*modules: ModuleType) -> dict[str, type[Event]]:
    """Every event class the modules define, by its on-disk name: a new event type is known once it is written
    (tests/run/test_history_catalog.py holds the list of names, so none goes missing unnoticed)."""
    found: dict[str, type[Event]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Event) and value.__module__ == module.__name__:
                found[value.NAME] = value
    return found


TYPES: dict[str, type[Event]] = _defined_in(events, failures)


def parse_event(record: object) -> Event | None:
    """The typed event of one parsed JSON line; None for anything this ddpctl does not know or cannot trust."""
    if not isinstance(record, dict):
        return None
    name = record.get("event")
    cls = TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        return None
    return build_event(cls, record)
