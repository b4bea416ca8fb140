"""A rank's metrics over time: `<run dir>/attempt-<n>/series-<rank>.jsonl`, one JSON object a line.

The progress record keeps only the newest values; this keeps their curve, for `ddpctl report`. The Heartbeat
hands each record it writes to `Series.add` (never from `step()` itself: the per-step path stays two deque
appends), which appends a point at most once per MIN_GAP_S and only when the step moved, so an idle pulse or a
pause adds nothing. A point: t (wall clock), step, epoch, samples (this rank's, cumulative), step_s and busy_s
(the window medians: busy vs. waiting for the others), and the numeric values (loss, the user's scalars).

Bounded for runs of weeks: once an attempt's file holds MAX_POINTS, the older half is thinned to every other
point and the file rewritten (tmp + rename), so recent points stay dense and old ones sparser, never more than
MAX_POINTS per rank and attempt. Appends open without following symlinks; nothing here raises into training.

`read_series` is the reader: bounded (MAX_BYTES, MAX_POINTS lines), tolerant of a file cut in the middle or
crafted (a line that is not a point with bounded numbers is counted as unreadable, never trusted).
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run.layout import RunLayout, rank_of_series

MIN_GAP_S = 1.0  # at most one point a second
MAX_POINTS = 2000  # per rank and attempt: above it the older half is thinned
MAX_VALUES = 16  # named values kept per point
MAX_NAME = 40
MAX_BYTES = 4 << 20  # the reader's bound per file (MAX_POINTS lines of MAX_VALUES values fit well within)
MAX_RANKS = 4096  # series files read per attempt
BIG = 1e15  # a number beyond this is not a step time, a loss or a count anyone plots


class Series:
    """The writer, one per Heartbeat; `add` is called after each progress record is written."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.points: list[dict[str, Any]] | None = None  # loaded lazily: the file may hold a restarted rank's
        self._lock = threading.Lock()

    def add(self, record: dict[str, Any]) -> None:
        if self.path is None or not self._lock.acquire(blocking=False):
            return  # another thread is adding the same state: skipping one point is harmless
        try:
            point = _point(record)
            if point is not None and self._wanted(point, record.get("phase") == "done"):
                self._append(point)
        except Exception:  # noqa: S110 - the series is advisory: nothing about it may stop training
            pass
        finally:
            self._lock.release()

    def _wanted(self, point: dict[str, Any], final: bool) -> bool:
        if self.points is None:
            assert self.path is not None
            self.points = read_series(self.path).points
        if not self.points:
            return True
        last = self.points[-1]
        return point["step"] != last["step"] and (final or point["t"] - last["t"] >= MIN_GAP_S)

    def _append(self, point: dict[str, Any]) -> None:
        assert self.path is not None and self.points is not None
        self.points.append(point)
        if len(self.points) > MAX_POINTS:
            self.points = thin(self.points)
            text = "".join(json.dumps(p, allow_nan=False) + "\n" for p in self.points)
            safeio.write_text_atomic(self.path, text)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = safeio.open_append(self.path)
        try:
            safeio.write_all(fd, (json.dumps(point, allow_nan=False) + "\n").encode())
        finally:
            os.close(fd)


def thin(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every other point of the older half, the newer half whole: old history gets sparser, never lost."""
    half = len(points) // 2
    return points[:half:2] + points[half:]


def _point(record: dict[str, Any]) -> dict[str, Any] | None:
    step, t = record.get("step"), record.get("written")
    if not isinstance(step, int) or not isinstance(t, int | float):
        return None
    point: dict[str, Any] = {"t": t, "step": step}
    for key in ("epoch", "samples", "step_s", "busy_s"):
        if isinstance(record.get(key), int | float):
            point[key] = record[key]
    values = record.get("values")
    if isinstance(values, dict):
        numeric = {str(k)[:MAX_NAME]: v for k, v in values.items() if isinstance(v, int | float)}
        point["v"] = dict(list(numeric.items())[:MAX_VALUES])
    return point


@dataclass
class SeriesRead:
    points: list[dict[str, Any]] = field(default_factory=list)
    unreadable: int = 0  # lines that were not a valid point (a torn last line, a crafted one)
    truncated: bool = False  # the file was larger than the reader's bound: only its start was read
    error: str | None = None  # could not be opened (a symlink, no permission)


def read_series(path: Path) -> SeriesRead:
    """A series file's points, oldest first; bounded and tolerant (see the module's docstring)."""
    out = SeriesRead()
    try:
        fd = safeio.open_fd(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return out
    except OSError as err:
        out.error = safeio.describe(err)
        return out
    try:
        data = os.read(fd, MAX_BYTES + 1) if os.fstat(fd).st_size else b""
    finally:
        os.close(fd)
    out.truncated = len(data) > MAX_BYTES
    lines = data[:MAX_BYTES].split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    for line in lines[: MAX_POINTS * 2]:
        point = parse_point(line)
        if point is None:
            out.unreadable += 1
        else:
            out.points.append(point)
    out.unreadable += max(0, len(lines) - MAX_POINTS * 2)
    return out


def parse_point(line: bytes) -> dict[str, Any] | None:
    """One line as a point, or None: every number finite and within BIG, at most MAX_VALUES short names."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict) or not _number(raw.get("t")) or not _count(raw.get("step")):
        return None
    point: dict[str, Any] = {"t": float(raw["t"]), "step": int(raw["step"])}
    for key in ("epoch", "samples", "step_s", "busy_s"):
        if key in raw and raw[key] is not None:
            if not _number(raw[key]):
                return None
            point[key] = raw[key]
    values = raw.get("v", {})
    if not isinstance(values, dict) or len(values) > MAX_VALUES:
        return None
    if not all(isinstance(k, str) and len(k) <= MAX_NAME and _number(v) for k, v in values.items()):
        return None
    point["v"] = {k: float(v) for k, v in values.items()}
    return point


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and abs(value) < BIG


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53


def attempt_series(layout: RunLayout, attempt: int) -> dict[int, SeriesRead]:
    """Every rank's series of one attempt, by rank (at most MAX_RANKS files)."""
    found: dict[int, SeriesRead] = {}
    try:
        entries = sorted(p.name for p in layout.attempt_dir(attempt).iterdir())
    except OSError:
        return found
    for name in entries:
        rank = rank_of_series(name)
        if rank is not None and len(found) < MAX_RANKS:
            found[rank] = read_series(layout.series_file(attempt, rank))
    return found
