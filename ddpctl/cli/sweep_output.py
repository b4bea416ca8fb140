"""`ddpctl sweep results` output: a table (the best marked *), JSON lines, or CSV. Names from the run dir pass
through ddpctl.sanitize before a terminal; JSON escapes control characters itself."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence

from ddpctl.health.results import Ranked
from ddpctl.sanitize import visible


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def print_results(ranked: Sequence[Ranked], metric: str, mode: str, shape: str) -> None:
    if shape == "json":
        for row in ranked:
            task = row.task
            print(json.dumps({
                "run": task.name, "run_dir": str(task.run_dir), "step": task.step, "final": dict(task.final),
                "low": dict(task.low), "high": dict(task.high), "metric": metric, "mode": mode,
                "best": task.best(metric, mode), "best_point": row.best_point,
            }))  # fmt: skip
        return
    if shape == "csv":
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(["run", "run_dir", "step", f"{metric}_final", f"{metric}_{mode}", "best_point"])
        for row in ranked:
            task = row.task
            best, final = task.best(metric, mode), task.final.get(metric)
            out.writerow([visible(task.name), visible(str(task.run_dir)), task.step, final, best, int(row.best_point)])
        return
    _table(ranked, metric, mode)


def _table(ranked: Sequence[Ranked], metric: str, mode: str) -> None:
    shown = visible(metric)
    header = ("", "run", "step", f"{shown} final", f"{shown} {mode}")
    rows = [
        (
            "*" if row.best_point else "",
            visible(row.task.name),
            "-" if row.task.step is None else str(row.task.step),
            _number(row.task.final.get(metric)),
            _number(row.task.best(metric, mode)),
        )
        for row in ranked
    ]
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]
    for cells in [header, *rows]:
        print(
            "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        )
    if not ranked:
        print(f"no run dirs found; nothing to rank by {shown}", file=sys.stderr)
    elif not any(row.best_point for row in ranked):
        print(f"no task reported {shown} (beat.step(..., {shown}=...))", file=sys.stderr)
