"""The base of every event of a run's events.jsonl and the vocabulary of failures (pure: no file access here).

A line on disk is `{"t": ..., "event": NAME, field: value, ...}` with sorted keys, exactly what the field names
of its `Event` subclass say (`events` declares the run's lifecycle, `failures` what ends an attempt unplanned,
`catalog` reads a line back). `Kind` is what a requeue is charged to (`spec.requeue.max_*`), `Cause` what ended an
attempt: the next kinds and causes are one entry each.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Literal, TypeVar, get_args

# The budgets a requeue is charged to; node_failure: an infrastructure failure (a hang the watchdog ended; later
# a node lost, a rank crash), requeue.max_node_failures.
Kind = Literal["preemption", "timeout", "failure", "node_failure"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Action = Literal["requeue", "finish"]
# What ended an attempt (the failure model's causes); `Decided.cause` carries it where a writer knows it.
# stop-timeout: a stop nobody acknowledged, the attempt killed at the end of its lead time (by Slurm's grace time, or
# the local backend standing in for it): the stop's own end, charged to its kind, never the script's error.
Cause = Literal[
    "stop",
    "stop-timeout",
    "node-lost",
    "rank-crash",
    "oom",
    "hang",
    "script-error",
    "setup-error",
    "preflight",
    "node-check",
]
CAUSES: tuple[Cause, ...] = get_args(Cause)
CauseClass = Literal["stop", "infrastructure", "script", "setup"]
# Each cause's class, the one table of them: a stop (charged to its signal's kind), the infrastructure (charged to
# requeue.max_node_failures, blamed on the node at its first time), the script's own (an OOM: its memory use), or
# the setup's (fails alike on every node).
CAUSE_CLASS: dict[Cause, CauseClass] = {
    "stop": "stop",
    "stop-timeout": "stop",
    "node-lost": "infrastructure",
    "rank-crash": "infrastructure",
    "oom": "script",
    "hang": "infrastructure",
    "script-error": "script",
    "setup-error": "setup",
    "preflight": "infrastructure",
    "node-check": "infrastructure",
}
# What blame, exclude and the preflight's "after an infrastructure failure" read.
INFRASTRUCTURE_CAUSES: frozenset[Cause] = frozenset(c for c, of in CAUSE_CLASS.items() if of == "infrastructure")
# Those that end the run whatever signal comes after them; a rank crash does not (a stop's kill can crash a rank).
RUN_ENDING_CAUSES: frozenset[Cause] = INFRASTRUCTURE_CAUSES - {"rank-crash"}
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


E = TypeVar("E", bound=Event)
