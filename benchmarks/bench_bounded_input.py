"""Work that grows with input stays bounded and linear (issue 10): two measurements, each against a baseline.

1. `ddpctl submit --dry-run` at --big nodes vs at --small nodes, per node: a linear dry run has a per-node ratio
   near 1 (before the fix it was quadratic: 10,000 nodes took 26 s). Target: per-node ratio <= 1.5.
2. `ddpctl render` of an 866-byte YAML merge-key bomb (26 nested `<<: [*a, *a]`) vs a plain spec: refused before
   it is expanded (before the fix: 41 s and 4 GB, then MemoryError). Target: ratio <= 2.

Run: python benchmarks/bench_bounded_input.py [--rounds 5] [--small 1000] [--big 10000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _timing import alternate, report

REPO = Path(__file__).resolve().parent.parent


def ddpctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddpctl", *args]


def bomb(path: Path) -> Path:
    items = ["&a0 {k0: 1}"] + [f"&a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: 1}}" for i in range(1, 27)]
    path.write_text(f"name: bomb\nscript: jobs/example/train.py\nenv: {{<<: [{', '.join(items)}]}}\n")
    return path


def refused(argv: list[str]) -> list[str]:
    """The bomb exits 2 by design; time it through a shell that turns exactly that into success."""
    quoted = " ".join(f"'{a}'" for a in argv)
    return ["sh", "-c", f"{quoted} >/dev/null 2>&1; test $? -eq 2"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--big", type=int, default=10000)
    args = parser.parse_args()
    spec = "jobs/example.yaml"
    dry = [ddpctl("submit", spec, "--dry-run", "--set", f"nodes={n}") for n in (args.big, args.small, 1)]
    big, small = alternate(dry[0], dry[1], args.rounds, cwd=str(REPO))
    one, _ = alternate(dry[2], dry[2], args.rounds, cwd=str(REPO))
    base = statistics.median(one)  # start-up and the batch script: paid once, whatever the node count
    per_node = ((statistics.median(big) - base) / args.big) / ((statistics.median(small) - base) / args.small)
    report(f"dry run, {args.big} nodes", big, f"dry run, {args.small} nodes", small, "linear")
    print(f"dry run, 1 node: median {base * 1000:.1f} ms (subtracted below)")
    print(f"per-node cost ratio {args.big}/{args.small} nodes = {per_node:.2f} (target <= 1.5; 1.0 is linear)")
    with tempfile.TemporaryDirectory() as tmp:
        bomb_file = bomb(Path(tmp) / "bomb.yaml")
        check = subprocess.run(
            ddpctl("render", str(bomb_file)), cwd=REPO, capture_output=True, text=True, timeout=120, check=False
        )
        print(f"bomb: exit {check.returncode}: {check.stderr.strip()}")
        ours, plain = alternate(
            refused(ddpctl("render", str(bomb_file))), ddpctl("render", spec), args.rounds, cwd=str(REPO)
        )
        report("render merge-key bomb", ours, "render jobs/example.yaml", plain, "<= 2")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
