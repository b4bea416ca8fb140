"""A sweep's results: each task's final and best heartbeat values (`beat.step(..., loss=...)`), read from the
progress records in its run dir, and the tasks ranked by one of them.

What a run dir says: per attempt, the lowest rank's latest progress record (rank 0's when it wrote one) holds
the values it reported last (`values`) and, since the heartbeat keeps them, each value's lowest and highest as
written (`extremes`; the heartbeat writes at most once a second, so these are of the values it sampled, not of
every step). A task's final values are those of its newest attempt with a record; its lowest and highest span
every attempt. Records are read with ddpctl.safeio (no symlink followed, bounded) and checked like every other
progress reader's; a value that is not a finite number is left out. Ranking is pure (`rank`).
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpctl.errors import DdpctlError
from ddpctl.health.records import progress_records
from ddpctl.run.layout import RunLayout, attempts_in

MAX_ATTEMPTS_READ = 256  # the newest attempts of a task whose records are read (a run has a few)
MAX_NAMES = 64  # named values taken from one record
MODES = ("min", "max")
MAX_TASKS = 4096  # run dirs one results call reads


@dataclass(frozen=True)
class TaskResult:
    """One task: its run dir, the last step reported, final values, and each value's lowest and highest."""

    run_dir: Path
    step: int | None = None
    final: Mapping[str, float] = field(default_factory=dict)
    low: Mapping[str, float] = field(default_factory=dict)
    high: Mapping[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.run_dir.name

    def best(self, metric: str, mode: str) -> float | None:
        return (self.low if mode == "min" else self.high).get(metric)


@dataclass(frozen=True)
class Ranked:
    """A task in the ranking: `best_point` marks the one whose best value of the metric is the best of all."""

    task: TaskResult
    best_point: bool


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _items(value: Any) -> list[tuple[Any, Any]]:
    """The first MAX_NAMES entries of a record's mapping field; none when it is not a mapping."""
    return list(value.items())[:MAX_NAMES] if isinstance(value, dict) else []


def from_records(run_dir: Path, records: Sequence[Mapping[str, Any]]) -> TaskResult:
    """A task's result from its chosen record of each attempt, oldest first (pure)."""
    step, final = None, {}
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    for record in records:
        final = {str(k): float(v) for k, v in _items(record.get("values")) if _finite(v)}
        step = record.get("step") if isinstance(record.get("step"), int) else step
        seen = [(str(k), v) for k, v in _items(record.get("extremes"))]
        pairs = [(k, v) for k, v in seen if isinstance(v, list) and len(v) == 2 and all(map(_finite, v))]
        pairs += [(k, [v, v]) for k, v in final.items()]  # a record from before `extremes`: its last value
        for name, (lo, hi) in pairs:
            low[name] = min(low.get(name, float(lo)), float(lo))
            high[name] = max(high.get(name, float(hi)), float(hi))
    return TaskResult(run_dir, step, final, low, high)


def read_task(run_dir: Path) -> TaskResult:
    """A run dir's result: the lowest rank's record of each of its newest attempts."""
    layout = RunLayout(run_dir)
    try:
        attempts = attempts_in(entry.name for entry in run_dir.iterdir())[-MAX_ATTEMPTS_READ:]
    except OSError:
        attempts = []
    chosen = []
    for attempt in attempts:
        records = progress_records(layout, attempt)
        if records:
            chosen.append(records[min(records)])
    return from_records(run_dir, chosen)


def rank(tasks: Iterable[TaskResult], metric: str, mode: str) -> list[Ranked]:
    """Tasks with the metric first, best value first (lowest for `min`), then by final value and name; tasks
    without it after them, by name. The first is marked (pure)."""

    def key(task: TaskResult) -> tuple[int, float, float, str]:
        best, final = task.best(metric, mode), task.final.get(metric)
        sign = 1.0 if mode == "min" else -1.0
        return (
            best is None,
            sign * best if best is not None else 0.0,
            sign * final if final is not None else math.inf,
            task.name,
        )

    ordered = sorted(tasks, key=key)
    return [
        Ranked(task, best_point=index == 0 and task.best(metric, mode) is not None)
        for index, task in enumerate(ordered)
    ]


def find_tasks(targets: Sequence[Path]) -> list[Path]:
    """The run dirs named: a run dir (it holds job.yaml) as it is, any other directory (a sweep's
    `<run_dir>/<name>/`) as its sub-directories that are run dirs, by name; symlinked entries are skipped."""
    found: list[Path] = []
    for target in targets:
        if _is_run_dir(target):
            found.append(target)
            continue
        try:
            entries = sorted(os.scandir(target), key=lambda entry: entry.name)
        except OSError as err:
            raise DdpctlError(f"{target}: not a run dir or a directory of run dirs ({err.strerror or err})") from None
        found += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False) and _is_run_dir(Path(e.path))]
        if len(found) > MAX_TASKS:
            break
    if len(found) > MAX_TASKS:
        raise DdpctlError(f"more than {MAX_TASKS} run dirs named; name fewer (a sweep has at most 1001 tasks)")
    return found


def _is_run_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode) and stat.S_ISREG(os.lstat(RunLayout(path).spec_file).st_mode)
    except OSError:
        return False
