"""Read progress records and placement files from a run dir: bounded reads, symlinks never followed."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run.layout import RunLayout, attempts_in, rank_of_info, rank_of_progress

Record = dict[str, Any]


def _names(directory: Path) -> list[str]:
    return [entry.name for entry in directory.iterdir()]  # OSError (missing, not a directory) to the caller


def progress_records(layout: RunLayout, attempt: int) -> dict[int, Record]:
    """rank -> its latest progress record in that attempt (torn or foreign files skipped)."""
    out: dict[int, Record] = {}
    try:
        names = _names(layout.attempt_dir(attempt))
    except OSError:
        return out
    for name in names:
        rank = rank_of_progress(name)
        if rank is not None and (record := safeio.read_json(layout.attempt_dir(attempt) / name)) is not None:
            out[rank] = record
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
        rank = rank_of_info(name)
        if rank is not None and (record := safeio.read_json(directory / name)) is not None:
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
