"""The watchdog's side of the flight-recorder dump: ask every rank, wait a bounded time, read what came.

The request is a file in the attempt dir that each rank's heartbeat thread polls (ddpctl.runtime.flightrec);
every node's watchdog may write it (the same content), the recording node reads the answers. Only a live rank
with ddpctl's heartbeat can answer: the others (no `runtime.Heartbeat`, a silent process, the GIL held) are not
waited for, and a rank that was expected but did not answer within WAIT_S counts as having no dump.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from ddpctl import safeio
from ddpctl.run.layout import RunLayout

WAIT_S = 5.0  # from the request: a heartbeat thread polls it every 0.5 s (its every_s / 2)
MAX_DUMP_BYTES = 256 * 1024  # a rank writes at most 64 trimmed entries: a few tens of KB


def request(layout: RunLayout, attempt: int, why: str) -> None:
    with contextlib.suppress(OSError):  # no dumps then: the hang is still recorded from the stacks
        safeio.write_json_atomic(layout.flight_record(attempt), {"t": round(time.time(), 3), "why": why[:200]})


def collect(layout: RunLayout, attempt: int, ranks: Iterable[int], expected: Iterable[int]) -> dict[int, Any]:
    """rank -> its dump (None: none came). Waits until every `expected` rank answered, at most WAIT_S from the
    request; the other `ranks` are read as they are."""
    asked = safeio.read_json(layout.flight_record(attempt)) or {}
    since = float(asked["t"]) if isinstance(asked.get("t"), (int, float)) else time.time()
    deadline = time.monotonic() + max(0.0, since + WAIT_S - time.time())
    waiting = set(expected)
    while True:
        waiting = {r for r in waiting if not layout.flight_record(attempt, r).exists()}
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return {r: safeio.read_json(layout.flight_record(attempt, r), MAX_DUMP_BYTES) for r in sorted(set(ranks))}
