"""`ddpctl sweep` of an N-point sweep (default 100) vs N separate `ddpctl submit` calls, one per point with its
`--set` (what a user without sweeps runs): both sides alternately, as fresh processes.

The spec is a 2-node job with `snapshot: off` on both sides (the snapshot's check is the same per submit and is
measured by bench_snapshot.py). The ratio is sweep / separate submits.

- Default: dry runs (`sweep --dry-run` vs `submit --dry-run`); no cluster is asked.
- `--real`: real submissions to the Slurm cluster `sinfo` reaches. Every job is submitted with
  `sbatch: {begin: now+1hour}`, so none starts, and each side's jobs are cancelled after its timed run (the
  cancel is not timed). The separate submits use one name per point (`bench-sweep-<i>`), as a hand-made sweep
  would; the sweep is one held array, its run dirs, one release.

    python benchmarks/bench_sweep.py [--points 100] [--rounds 3] [--real]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
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

REAL = 'sbatch: {begin: "now+1hour"}\n'


def commands(points: int, real: bool) -> tuple[list[str], list[str]]:
    values = [f"{0.001 * (i + 1):.3f}" for i in range(points)]
    python = shlex.quote(sys.executable)
    dry = [] if real else ["--dry-run"]
    sweep = [sys.executable, "-m", "ddpctl", "sweep", "job.yaml", "--grid", f"env.LR={','.join(values)}", *dry]
    name = "--set name=bench-sweep-$i " if real else ""
    loop = (
        f"i=0; for v in {' '.join(values)}; do i=$((i+1)); {python} -m ddpctl submit job.yaml {name}"
        f"--set env.LR=$v {' '.join(dry)} >/dev/null || exit 1; done"
    )
    return sweep, ["bash", "-c", loop]


def cancel_all(points: int) -> None:
    """Cancel every job either side submitted (found by name: nothing else on the cluster is touched)."""
    names = ",".join(["bench-sweep", *(f"bench-sweep-{i + 1}" for i in range(points))])
    found = subprocess.run(["squeue", "-h", "-r", "-o", "%A", "-n", names], check=False, capture_output=True, text=True)
    ids = sorted(set(found.stdout.split()))
    if ids:
        subprocess.run(["scancel", *ids], check=False)


def timed(argv: list[str], points: int, **kwargs: object) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, **kwargs)  # type: ignore[call-overload]
    elapsed = time.perf_counter() - start
    cancel_all(points)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


def real_rounds(
    sweep: list[str], separate: list[str], rounds: int, points: int, **kwargs: object
) -> tuple[list[float], list[float]]:
    """Alternate like `_timing.alternate`, cancelling each side's jobs after it (outside the timing)."""
    ours: list[float] = []
    theirs: list[float] = []
    for index in range(rounds):
        pair = [("sweep", sweep, ours), ("separate submits", separate, theirs)]
        for label, argv, sink in pair if index % 2 == 0 else reversed(pair):
            sink.append(timed(argv, points, **kwargs))
            print(f"  round {index + 1}: {label} {sink[-1]:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--real", action="store_true", help="submit to the cluster (jobs held by begin, cancelled)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "train.py").write_text("print('hi')\n")
        (work / "job.yaml").write_text(SPEC + (REAL if args.real else ""))
        sweep, separate = commands(args.points, args.real)
        env = {**os.environ, "DDPCTL_HOME": str(work / "home")}
        if args.real:
            cancel_all(args.points)
            ours, theirs = real_rounds(sweep, separate, args.rounds, args.points, cwd=str(work), env=env)
        else:
            alternate(sweep, separate, 1, cwd=str(work), env=env)  # warm-up: bytecode, page cache
            ours, theirs = alternate(sweep, separate, args.rounds, cwd=str(work), env=env)
        kind = "" if args.real else " --dry-run"
        report(
            f"ddpctl sweep{kind} ({args.points} points)",
            ours,
            f"{args.points} x ddpctl submit{kind}",
            theirs,
            "< 0.10",
        )
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
