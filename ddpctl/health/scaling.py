"""`ddpctl scale` results (pure table maths) and their files: scaling.json always, scaling.png with matplotlib.

Speedup is the steady-state samples/s at a size over that of the first (smallest) size; efficiency is the
speedup over the growth in ranks (speedup / N when N times the ranks of the first size). Steady state: the
progress-record history after the first `warmup` steps (the "first batch trap": start-up, allocator and
autotuning costs would otherwise flatter the larger runs or penalise the shorter ones).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ddpctl import safeio


@dataclass(frozen=True)
class SizeResult:
    nodes: int
    ranks: int
    job_id: str
    state: str
    samples_per_s: float | None
    speedup: float | None = None
    efficiency: float | None = None


def with_speedups(results: list[SizeResult]) -> list[SizeResult]:
    base = results[0] if results else None
    out = []
    for result in results:
        if base is None or base.samples_per_s is None or result.samples_per_s is None:
            out.append(result)
            continue
        speedup = result.samples_per_s / base.samples_per_s
        out.append(
            SizeResult(**{**asdict(result), "speedup": speedup, "efficiency": speedup / (result.ranks / base.ranks)})
        )
    return out


def table(results: list[SizeResult]) -> str:
    lines = [f"{'nodes':>5}  {'ranks':>5}  {'samples/s':>10}  {'speedup':>7}  {'efficiency':>10}  job"]
    for r in results:
        rate = f"{r.samples_per_s:10.1f}" if r.samples_per_s is not None else f"{'n/a':>10}"
        speed = f"{r.speedup:6.2f}x" if r.speedup is not None else f"{'n/a':>7}"
        eff = f"{r.efficiency * 100:9.0f}%" if r.efficiency is not None else f"{'n/a':>10}"
        note = "" if r.state in ("COMPLETED", "CANCELLED") else f" ({r.state})"
        lines.append(f"{r.nodes:>5}  {r.ranks:>5}  {rate}  {speed}  {eff}  {r.job_id}{note}")
    return "\n".join(lines)


def write_json(path: Path, results: list[SizeResult], meta: dict[str, Any]) -> None:
    safeio.write_text_atomic(path, json.dumps({**meta, "sizes": [asdict(r) for r in results]}, indent=2) + "\n")


def write_png(path: Path, results: list[SizeResult], title: str) -> str | None:
    """Draw samples/s against ranks with the ideal line; returns why not when it cannot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install 'ddpctl[plot]')"
    measured = [r for r in results if r.samples_per_s is not None]
    if not measured:
        return "no size produced a steady-state rate"
    ranks = [r.ranks for r in measured]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    base = measured[0]
    left.plot(ranks, [r.samples_per_s for r in measured], "o-", label="measured")
    left.plot(ranks, [base.samples_per_s * n / base.ranks for n in ranks], "--", label="ideal (linear)")  # type: ignore[operator]
    left.set(xlabel="ranks", ylabel="samples/s (steady state)", title=title, xticks=ranks)
    left.legend()
    right.plot(ranks, [100 * (r.efficiency or 0) for r in measured], "o-")
    right.set(xlabel="ranks", ylabel="efficiency %", ylim=(0, 110), title="scaling efficiency", xticks=ranks)
    fig.tight_layout()

    def save(fd: int) -> None:
        with os.fdopen(fd, "wb", closefd=False) as out:
            fig.savefig(out, format="png", dpi=100)

    try:
        safeio.write_atomic(path, save)
    finally:
        plt.close(fig)
    return None
