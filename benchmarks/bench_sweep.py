"""`ddpctl sweep --dry-run` of an N-point sweep (default 100) vs N separate `ddpctl submit --dry-run` calls, one
per point with its `--set` (what a user without sweeps runs): both sides alternately, as fresh processes.

The spec is a 2-node job with `snapshot: off` on both sides (the snapshot's check is the same per submit and is
measured by bench_snapshot.py); no cluster is asked (both are dry runs). The ratio is sweep / separate submits.

    python benchmarks/bench_sweep.py [--points 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

from _timing import alternate, report

SPEC = """\
name: bench-sweep
script: train.py
nodes: 2
nproc_per_node: 2
time: "00:10:00"
run_dir: runs
snapshot: "off"
env: {OMP_NUM_THREADS: "1"}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "train.py").write_text("print('hi')\n")
        (work / "job.yaml").write_text(SPEC)
        values = [f"{0.001 * (i + 1):.3f}" for i in range(args.points)]
        python = shlex.quote(sys.executable)
        sweep = [
            sys.executable,
            "-m",
            "ddpctl",
            "sweep",
            "job.yaml",
            "--grid",
            f"env.LR={','.join(values)}",
            "--dry-run",
        ]
        loop = (
            f"for v in {' '.join(values)}; do {python} -m ddpctl submit job.yaml --set env.LR=$v --dry-run "
            ">/dev/null || exit 1; done"
        )
        separate = ["bash", "-c", loop]
        env = {**os.environ, "DDPCTL_HOME": str(work / "home")}
        alternate(sweep, separate, 1, cwd=str(work), env=env)  # warm-up: bytecode, page cache
        ours, theirs = alternate(sweep, separate, args.rounds, cwd=str(work), env=env)
        report(
            f"ddpctl sweep --dry-run ({args.points} points)",
            ours,
            f"{args.points} x ddpctl submit --dry-run",
            theirs,
            "< 0.10",
        )


if __name__ == "__main__":
    main()
