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
    ranked: Sequence[Ranked], metric: str, mode: str, shape: str, states: Mapping[Path, str] | None = None
) -> None:
    """`states`: each run dir's job state where its job is known (`-` / null where not)."""
    states = states or {}
    if shape == "json":
        for row in ranked:
            task = row.task
            print(json.dumps({
                "run": task.name, "run_dir": str(task.run_dir), "state": states.get(task.run_dir),
                "step": task.step, "final": dict(task.final),
                "low": dict(task.low), "high": dict(task.high), "metric": metric, "mode": mode,
                "best": task.best(metric, mode), "best_point": row.best_point,
            }))  # fmt: skip
        return
    if shape == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(["run", "run_dir", "state", "step", f"{metric}_final", f"{metric}_{mode}", "best_point"])
        for row in ranked:
            task = row.task
            best, final = task.best(metric, mode), task.final.get(metric)
            where = visible(str(task.run_dir))
            state = states.get(task.run_dir, "")
            out.writerow([visible(task.name), where, state, task.step, final, best, int(row.best_point)])
        return
    _table(ranked, metric, mode, states)


def _table(ranked: Sequence[Ranked], metric: str, mode: str, states: Mapping[Path, str]) -> None:
    shown = visible(metric)
    header = ("", "run", "state", "step", f"{shown} final", f"{shown} {mode}")
    rows = [
        (
            "*" if row.best_point else "",
            visible(row.task.name),
            states.get(row.task.run_dir, "-"),
            "-" if row.task.step is None else str(row.task.step),
            _number(row.task.final.get(metric)),
            _number(row.task.best(metric, mode)),
        )
        for row in ranked
    ]
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]
    for cells in [header, *rows]:
        print(
            "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        )
    if not ranked:
        print(f"no run dirs found; nothing to rank by {shown}", file=sys.stderr)
    elif not any(row.best_point for row in ranked):
        print(f"no task reported {shown} (beat.step(..., {shown}=...))", file=sys.stderr)
