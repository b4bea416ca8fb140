"""What one TAB costs with a large registry (issue 31): the job-name completer, and a whole completion request.

Writes registries of N lines (as `submit` writes them) and times, per size, the completer `ddpctl` runs on every
TAB after a job argument (`cli.completion.job_refs`) against the baseline, the old completer (every record parsed,
then a list-membership dedupe: quadratic), which is timed only up to --old-max lines (it took 14.6 s per TAB at
10,000). Then a whole completion request (`ddpctl status <TAB>` through argcomplete's protocol, a fresh process),
beside the same request with an empty registry: the registry's share of a TAB.

    python benchmarks/bench_completion.py [--sizes 10000,100000] [--old-max 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddpctl.cli.completion import job_refs  # noqa: E402  (after the path insert, as the other benchmarks)
from ddpctl.run.registry import JobRecord, Registry  # noqa: E402


def write_registry(home: Path, lines: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with (home / "registry.jsonl").open("w") as out:
        for n in range(lines):
            record = JobRecord(str(100000 + n), f"sweep-{n % 500}", f"/runs/sweep/{n}", "sbatch", 1.7e9 + n)
            out.write(json.dumps(asdict(record), sort_keys=True) + "\n")


def old_job_refs(home: Path, prefix: str) -> list[str]:
    """The completer before issue 31, verbatim but for the registry argument."""
    refs: list[str] = []
    for record in reversed(Registry(home).records()):
        refs += [ref for ref in (record.name, record.job_id) if ref.startswith(prefix) and ref not in refs]
    return refs


def best(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - began)
    return min(times)


def tab(home: Path) -> float:
    line = "ddpctl status "
    env = {**os.environ, "DDPCTL_HOME": str(home), "COMP_LINE": line, "COMP_POINT": str(len(line))}
    env |= {"_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": "\n", "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    subprocess.run(
        ["bash", "-c", 'exec "$0" -m ddpctl 8>/dev/null 9>/dev/null', sys.executable], env=env, check=True, cwd=ROOT
    )
    return time.perf_counter() - began


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--old-max", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        empty = Path(scratch) / "empty"
        empty.mkdir()
        base_tab = min(tab(empty) for _ in range(args.rounds))
        print(f"whole TAB, empty registry: {base_tab * 1000:.0f} ms (python start + argcomplete)")
        for size in (int(s) for s in args.sizes.split(",")):
            home = Path(scratch) / f"r{size}"
            write_registry(home, size)
            os.environ["DDPCTL_HOME"] = str(home)
            new = best(lambda: job_refs(""), args.rounds)
            oldest = best(lambda: job_refs("100000"), args.rounds)  # only the first line has it: the whole file
            line = f"{size:>7} lines: completer {new * 1000:7.1f} ms (worst prefix {oldest * 1000:.1f} ms)"
            if size <= args.old_max:
                old = best(lambda home=home: old_job_refs(home, ""), 1)
                line += f" | old completer {old * 1000:9.1f} ms | ratio {new / old:.4f}"
            whole = min(tab(home) for _ in range(args.rounds))
            line += f" | whole TAB {whole * 1000:.0f} ms ({(whole - base_tab) * 1000:+.0f} ms for the registry)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
