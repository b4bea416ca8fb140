"""`ddpctl sweep results` output: a table (the best marked *), JSON lines, or CSV. Names from the run dir pass
through ddpctl.sanitize before a terminal; JSON escapes control characters itself."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ddpctl.health.results import Ranked
from ddpctl.sanitize import visible


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def print_results(
    ranked: Sequence[Ranked],
    metric: str,
    mode: str,
    shape: str,
    *,
    states: Mapping[Path, str] | None = None,
    points: Mapping[Path, str] | None = None,
) -> None:
    """`states`: each run dir's job state where its job is known (`-` / null where not); `points`: each sweep
    task's grid values (`lr=0.1 batch=32`, as `sweep --dry-run` lists them), shown first."""
    states, points = states or {}, points or {}
    if shape == "json":
        for row in ranked:
            task = row.task
            print(json.dumps({
                "point": points.get(task.run_dir), "run": task.name, "run_dir": str(task.run_dir),
                "state": states.get(task.run_dir), "step": task.step, "final": dict(task.final),
                "low": dict(task.low), "high": dict(task.high), "metric": metric, "mode": mode,
                "best": task.best(metric, mode), "best_point": row.best_point,
            }))  # fmt: skip
        return
    if shape == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(["point", "run", "run_dir", "state", "step", f"{metric}_final", f"{metric}_{mode}", "best_point"])
        for row in ranked:
            task = row.task
            best, final = task.best(metric, mode), task.final.get(metric)
            where, point = visible(str(task.run_dir)), visible(points.get(task.run_dir, ""))
            state = states.get(task.run_dir, "")
            out.writerow([point, visible(task.name), where, state, task.step, final, best, int(row.best_point)])
        return
    _table(ranked, metric, mode, states, points)


def _table(
    ranked: Sequence[Ranked], metric: str, mode: str, states: Mapping[Path, str], points: Mapping[Path, str]
) -> None:
    shown = visible(metric)
    header = ("", "point", "run", "state", "step", f"{shown} final", f"{shown} {mode}")
    rows = [
        (
            "*" if row.best_point else "",
            visible(points.get(row.task.run_dir, "-"))[:60],
            visible(row.task.name),
            states.get(row.task.run_dir, "-"),
            "-" if row.task.step is None else str(row.task.step),
            _number(row.task.final.get(metric)),
            _number(row.task.best(metric, mode)),
        )
        for row in ranked
    ]
    # A column no task has a value for says nothing: it is left out, and the line below the table says why.
    keep = [i for i in range(len(header)) if i in (0, 2) or not rows or any(cells[i] != "-" for cells in rows)]
    table = [[cells[i] for i in keep] for cells in [header, *rows]]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(keep))]
    left = {0, 1, 2, 3}  # the marker, point, run and state read from the left; numbers from the right
    for cells in table:
        print(
            "  ".join(
                c.ljust(w) if keep[i] in left else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )
    for why in _left_out(ranked, shown, states):
        print(why, file=sys.stderr)


def _left_out(ranked: Sequence[Ranked], shown: str, states: Mapping[Path, str]) -> list[str]:
    if not ranked:
        return [f"no run dirs found; nothing to rank by {shown}"]
    notes = []
    if not any(row.task.run_dir in states for row in ranked):
        notes.append("no job in the registry has these run dirs: no state to show")
    if all(row.task.step is None for row in ranked):
        notes.append("no task reported a step: ddpctl.runtime's Heartbeat (beat.step(...)) reports them")
    if not any(row.best_point for row in ranked):
        notes.append(f"no task reported {shown} (beat.step(..., {shown}=...))")
    return notes
