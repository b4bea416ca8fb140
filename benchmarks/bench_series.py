"""Per-step cost of the metrics series (runtime.series) on top of the progress heartbeat.

Two heartbeats in one process write to temporary run dirs at their usual rate (a record at most once a second):
one with its series (the default), one with the series switched off (`Series(None)`, the heartbeat as it was
before the series). Each step does `--work-us` of busy work (a stand-in for a training step) and calls
`beat.step(...)` with a loss and two scalars; blocks of steps of the two alternate for `--seconds`, so drift
hits both equally. Prints the median time per step of each, and the ratio (target: <= 1.01x). On a loaded
machine that ratio is mostly noise, so it also times `Series.add` itself (one point appended; what a step pays
once a second) and prints its share of a second of steps.

    python benchmarks/bench_series.py [--seconds 20] [--work-us 2000] [--block 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ddpctl.run import envvars
from ddpctl.runtime.progress import Heartbeat
from ddpctl.runtime.series import Series


def busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def block(beat: Heartbeat, start: int, steps: int, work_us: float) -> float:
    began = time.perf_counter()
    for step in range(start, start + steps):
        busy(work_us)
        beat.step(step, epoch=0, samples=32, loss=1.0 / step, lr=3e-4, grad_norm=0.5)
    return (time.perf_counter() - began) / steps


def add_cost(rounds: int = 300) -> float:
    """The median time of one `Series.add` that appends a point (the file opened, written, closed)."""
    with tempfile.TemporaryDirectory() as run_dir:
        writer, costs = Series(Path(run_dir) / "series-0.jsonl"), []
        for step in range(1, rounds + 1):
            record: dict[str, Any] = {"step": step, "written": 1000.0 + step, "samples": step, "step_s": 0.1}
            record["busy_s"] = 0.09
            record["values"] = {"loss": 1.0 / step, "lr": 3e-4, "grad_norm": 0.5}
            began = time.perf_counter()
            writer.add(record)
            costs.append(time.perf_counter() - began)
    return statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--work-us", type=float, default=2000.0)
    parser.add_argument("--block", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as with_dir, tempfile.TemporaryDirectory() as without_dir:
        beats = {}
        for name, run_dir in (("series", with_dir), ("no-series", without_dir)):
            beats[name] = Heartbeat(env={envvars.RUN_DIR: run_dir, envvars.ATTEMPT: "0", "RANK": "0"})
        beats["no-series"].series = Series(None)
        times: dict[str, list[float]] = {name: [] for name in beats}
        step, deadline, index = 1, time.monotonic() + args.seconds, 0
        while time.monotonic() < deadline:
            order = list(beats) if index % 2 == 0 else list(reversed(beats))
            for name in order:
                times[name].append(block(beats[name], step, args.block, args.work_us))
            step, index = step + args.block, index + 1
        for beat in beats.values():
            beat.close()
    ours, base = statistics.median(times["series"]), statistics.median(times["no-series"])
    print(f"heartbeat + series: median {ours * 1e6:.1f} us/step over {len(times['series'])} blocks")
    print(f"heartbeat alone:    median {base * 1e6:.1f} us/step over {len(times['no-series'])} blocks")
    print(f"ratio series/no-series = {ours / base:.4f} (target <= 1.01); steps {step - 1}")
    cost = add_cost()
    print(f"one Series.add (once a second at most): median {cost * 1e6:.1f} us = {cost * 100:.4f} % of a second")


if __name__ == "__main__":
    main()
