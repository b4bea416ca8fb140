"""Shared timing helpers for the benchmarks: run commands alternately, report medians and the ratio."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence


def time_command(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(list(argv), cwd=cwd, env=dict(env) if env else None, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def alternate(
    ours: Sequence[str], theirs: Sequence[str], rounds: int, **kwargs: object
) -> tuple[list[float], list[float]]:
    """Alternate the two commands so drift in machine load hits both equally."""
    ours_t: list[float] = []
    theirs_t: list[float] = []
    for index in range(rounds):
        pair = [(ours, ours_t), (theirs, theirs_t)]
        for argv, sink in pair if index % 2 == 0 else reversed(pair):
            sink.append(time_command(argv, **kwargs))  # type: ignore[arg-type]
    return ours_t, theirs_t


def report(label_ours: str, ours: list[float], label_theirs: str, theirs: list[float], target: str) -> float:
    m_ours, m_theirs = statistics.median(ours), statistics.median(theirs)
    ratio = m_ours / m_theirs
    print(f"{label_ours}: median {m_ours * 1000:.1f} ms over {len(ours)} runs")
    print(f"{label_theirs}: median {m_theirs * 1000:.1f} ms over {len(theirs)} runs")
    print(f"ratio {label_ours}/{label_theirs} = {ratio:.3f} (target {target})")
    return ratio
