"""Read progress records and placement files from a run dir: bounded reads, symlinks never followed."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run.layout import RunLayout, attempts_in, rank_of_info, rank_of_progress

Record = dict[str, Any]


def _names(directory: Path) -> list[str]:
    return [entry.name for entry in directory.iterdir()]  # OSError (missing, not a directory) to the caller


# Fields every reader does arithmetic on: a record (rank output, untrusted) with one of them wrong is skipped.
_INTS = ("step", "total_steps", "epoch")
_TIMES = ("t", "started", "written", "resumed", "step_s", "busy_s")


INT_LIMIT = 2**63  # no count or time is bigger; float() of a bigger int raises OverflowError in every reader
MAX_PATH = 60  # characters of a field's path shown in a note


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _huge(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT


def oversized(record: Any) -> str | None:
    """Where a record (at any depth) holds an integer beyond 64 bits, and how long it is (None: nowhere).
    Iterative: json.loads nests deeper than a recursive walk may go."""
    stack: list[tuple[str, Any]] = [("", record)]
    while stack:
        path, value = stack.pop()
        if _huge(value):
            return f"{path[:MAX_PATH]} is a {len(str(abs(value)))}-digit integer, expected below 2**63"
        if isinstance(value, dict):
            stack += [(f"{path}.{key}" if path else str(key), item) for key, item in value.items()]
        elif isinstance(value, list):
            stack += [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    return None


def record_problem(record: Record) -> str | None:
    """Why a progress record cannot be used (None: it can): the field, its value and what is allowed."""
    if (huge := oversized(record)) is not None:
        return huge
    for key in _INTS:
        value = record.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or abs(value) >= 2**63):
            return f"{key} is {value!r:.40}, expected an integer or null"
    for key in _TIMES:
        value = record.get(key)
        if value is not None and not _finite(value):
            return f"{key} is {value!r:.40}, expected a finite number or null"
    for key, kind in (("samples", (int, float)), ("window", int), ("history", list), ("node", str), ("phase", str)):
        value = record.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            return f"{key} is {value!r:.40}, expected {getattr(kind, '__name__', 'a number')}"
    if record.get("pause") is not None and not isinstance(record.get("pause"), dict):
        return f"pause is {record.get('pause')!r:.40}, expected an object or null"
    return None


def checked_progress_records(layout: RunLayout, attempt: int) -> tuple[dict[int, Record], list[str]]:
    """rank -> its latest progress record in that attempt, and one note per record skipped as invalid (torn
    or foreign files are skipped silently: a torn read is normal)."""
    out: dict[int, Record] = {}
    notes: list[str] = []
    try:
        names = _names(layout.attempt_dir(attempt))
    except OSError:
        return out, notes
    for name in sorted(names):
        rank = rank_of_progress(name)
        if rank is None or (record := safeio.read_json(layout.attempt_dir(attempt) / name)) is None:
            continue
        if (problem := record_problem(record)) is not None:
            notes.append(f"skipped attempt-{attempt}/{name}: {problem}")
        else:
            out[rank] = record
    return out, notes


def progress_records(layout: RunLayout, attempt: int) -> dict[int, Record]:
    """rank -> its latest valid progress record in that attempt (torn, foreign or invalid files skipped)."""
    return checked_progress_records(layout, attempt)[0]


def placements(layout: RunLayout, attempt: int) -> dict[int, Record]:
    """rank -> the worker's rank-<r>.json (node, pid, main thread), as ddpctl.node.worker wrote it."""
    out: dict[int, Record] = {}
    directory = layout.attempt_dir(attempt)
    try:
        names = _names(directory)
    except OSError:
        return out
    for name in names:
        rank = rank_of_info(name)
        record = safeio.read_json(directory / name) if rank is not None else None
        if rank is not None and record is not None and oversized(record) is None:
            out[rank] = record
    return out


def latest_attempt(layout: RunLayout) -> int | None:
    try:
        names = _names(layout.root)
    except OSError:
        return None
    numbers = attempts_in(names)
    return numbers[-1] if numbers else None


def last_line(path: Path, limit: int = 4096) -> tuple[str, float | None]:
    """The last non-empty line of a log (raw: callers make control characters visible) and its mtime."""
    data = safeio.read_bounded(path, limit, tail=True)
    try:
        mtime: float | None = os.lstat(path).st_mtime
    except OSError:
        mtime = None
    if not data:
        return "", mtime
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return (lines[-1] if lines else ""), mtime


def last_checkpoint(directory: Path) -> tuple[int, float] | None:
    """(step, completion time) of the newest checkpoint with its COMPLETE marker (runtime.Checkpointer)."""
    try:
        names = sorted((n for n in _names(directory) if re.match(r"^step-\d+$", n)), reverse=True)
    except OSError:
        return None
    for name in names:
        marker = safeio.read_json(directory / name / "COMPLETE")
        if marker is not None and isinstance(marker.get("time"), (int, float)):
            return int(name.removeprefix("step-")), float(marker["time"])
    return None
