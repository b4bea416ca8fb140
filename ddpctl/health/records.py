"""Read progress records and placement files from a run dir: bounded reads, symlinks never followed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ddpctl.run.layout import RunLayout

MAX_RECORD_BYTES = 256 * 1024  # a record is ~3 KB; anything bigger is not ours
PROGRESS_RE = re.compile(r"^progress-(\d+)\.json$")
Record = dict[str, Any]


def _names(directory: Path) -> list[str]:
    return [entry.name for entry in directory.iterdir()]  # OSError (missing, not a directory) to the caller


def read_bounded(path: Path, limit: int = MAX_RECORD_BYTES, tail: bool = False) -> bytes | None:
    """Up to `limit` bytes (the last ones with `tail`), or None when missing, a symlink or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if tail:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - limit), os.SEEK_SET)
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 65536))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_json(path: Path) -> Record | None:
    data = read_bounded(path)
    try:
        value = json.loads(data) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def progress_records(layout: RunLayout, attempt: int) -> dict[int, Record]:
    """rank -> its latest progress record in that attempt (torn or foreign files skipped)."""
    out: dict[int, Record] = {}
    try:
        names = _names(layout.attempt_dir(attempt))
    except OSError:
        return out
    for name in names:
        match = PROGRESS_RE.match(name)
        if match and (record := read_json(layout.attempt_dir(attempt) / name)) is not None:
            out[int(match.group(1))] = record
    return out


def placements(layout: RunLayout, attempt: int) -> dict[int, Record]:
    """rank -> the worker's rank-<r>.json (node, pid, main thread), as ddpctl.node.worker wrote it."""
    out: dict[int, Record] = {}
    directory = layout.attempt_dir(attempt)
    try:
        names = _names(directory)
    except OSError:
        return out
    for name in names:
        match = re.match(r"^rank-(\d+)\.json$", name)
        if match and (record := read_json(directory / name)) is not None:
            out[int(match.group(1))] = record
    return out


def latest_attempt(layout: RunLayout) -> int | None:
    try:
        names = _names(layout.root)
    except OSError:
        return None
    numbers = [
        int(n.removeprefix("attempt-"))
        for n in names
        if n.startswith("attempt-") and n.removeprefix("attempt-").isdigit()
    ]
    return max(numbers) if numbers else None


def last_line(path: Path, limit: int = 4096) -> tuple[str, float | None]:
    """The last non-empty line of a log (raw: callers make control characters visible) and its mtime."""
    data = read_bounded(path, limit, tail=True)
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
        marker = read_json(directory / name / "COMPLETE")
        if marker is not None and isinstance(marker.get("time"), (int, float)):
            return int(name.removeprefix("step-")), float(marker["time"])
    return None
