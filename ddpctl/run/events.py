"""Append-only JSON-lines event log of a run (events.jsonl).

Each event is written with one O_APPEND write, so concurrent writers (batch shell, launchers on several nodes
sharing the filesystem, rank 0) never interleave inside a line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddpctl import safeio


def append_event(path: Path, event: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"t": round(time.time(), 3), "event": event, **fields}
    line = (json.dumps(record, sort_keys=True, default=str) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = safeio.open_append(path)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return record


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Yield parsed events; a torn or garbled line (e.g. a node died mid-write) is skipped, not fatal."""
    try:
        text = safeio.read_text(path)
    except FileNotFoundError:
        return
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            yield record
