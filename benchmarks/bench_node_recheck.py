"""What `health.node_check_every_min` costs a node, without a cluster.

1. One check as the launcher runs it (`python -m ddpctl.node.checkprog --local-only`, `node_check: true`, the
   built-in checks on a temporary run dir): wall time and CPU time per check, median over `--rounds`.
2. The launcher's heartbeat while a slow check runs: two 2-node jobs on the local backend at the same time (so the
   machine's load hits both alike), one with a `node_check` of `--slow-s` seconds every 3 s (the floor: a check
   runs most of the time), one without checks. Every launcher's beat (`beat-node-<r>.json`, written every 2 s by a
   thread of its own) is read every 0.1 s; the gaps between consecutive beats are printed. Target: the same gaps.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAIN = """
import time
from ddpctl.runtime import Heartbeat
beat = Heartbeat(total_steps={steps})
for step in range(1, {steps} + 1):
    time.sleep(0.1)
    beat.step(step)
"""


def check_cost(rounds: int, root: Path) -> None:
    argv = [
        *(sys.executable, "-m", "ddpctl.node.checkprog", "--local-only", f"--result={root / 'r.json'}"),
        *(f"--store-file={root / 's.json'}", "--master-addr=localhost", "--node-rank=0", "--nnodes=1"),
        *("--timeout=5", f"--disk={root}", f"--disk={root / 'checkpoints'}", "--node-check=true"),
        "--node-check-timeout=10",
    ]
    walls = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / rounds
    print(f"one check: wall median {statistics.median(walls):.3f} s (max {max(walls):.3f} s), CPU {cpu:.3f} s")


def submit(root: Path, name: str, health: dict[str, object], steps: int) -> Path:
    script = root / "train.py"
    script.write_text(TRAIN.format(steps=steps))
    spec = root / f"{name}.yaml"
    fields = {
        "name": name, "script": str(script), "nodes": 2, "nproc_per_node": 1, "gpus_per_node": 0,
        "run_dir": str(root / "runs"), "backend": "local", "health": {"preflight": False, **health},
    }  # fmt: skip
    spec.write_text(json.dumps(fields))  # JSON is YAML
    env = {**os.environ, "DDPCTL_HOME": str(root / "home")}
    out = subprocess.run(
        [sys.executable, "-m", "ddpctl", "submit", str(spec)], env=env, capture_output=True, text=True, check=True
    ).stdout
    return Path(out.split("run dir:", 1)[1].split()[0])


def beat_gaps(runs: dict[str, Path], timeout_s: float) -> dict[str, list[float]]:
    """Each job's gaps between consecutive beats of each node (a beat missed by the reader is left out)."""
    last: dict[tuple[str, int], tuple[int, float]] = {}
    gaps: dict[str, list[float]] = {name: [] for name in runs}
    deadline = time.monotonic() + timeout_s
    while not all((d / "finished").exists() for d in runs.values()) and time.monotonic() < deadline:
        for name, run_dir in runs.items():
            for rank in (0, 1):
                try:
                    beat = json.loads((run_dir / "attempt-0" / f"beat-node-{rank}.json").read_text())
                except (OSError, ValueError):
                    continue
                seen = last.get((name, rank))
                if seen is not None and beat["seq"] == seen[0] + 1:
                    gaps[name].append(beat["t"] - seen[1])
                last[(name, rank)] = (beat["seq"], beat["t"])
        time.sleep(0.1)
    return gaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20, help="checks timed in part 1")
    parser.add_argument("--slow-s", type=float, default=10.0, help="how long the slow node check takes")
    parser.add_argument("--steps", type=int, default=600, help="training steps of 0.1 s each in part 2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        check_cost(args.rounds, root)
        ran = root / "checks-ran"
        slow = {"node_check": f"sleep {args.slow_s:g}; echo ok >> {ran}", "node_check_every_min": 0.05}
        runs = {"slow check": submit(root, "slow", slow, args.steps), "no check": submit(root, "none", {}, args.steps)}
        gaps = beat_gaps(runs, timeout_s=args.steps * 0.1 * 4 + 120)
        for name, found in gaps.items():
            if found:
                median = statistics.median(found)
                print(f"{name}: {len(found)} beat gaps, median {median:.2f} s, max {max(found):.2f} s")
        print(f"slow checks that ran to the end: {len(ran.read_text().splitlines()) if ran.exists() else 0}")
        print(f"load average {os.getloadavg()[0]:.1f} (target: the same gaps with and without the slow check)")


if __name__ == "__main__":
    main()
