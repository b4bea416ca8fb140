"""Expand a large hostlist with ddpctl's parser and with python-hostlist, interleaved, and compare medians.

Run: python benchmarks/bench_hostlist.py [--rounds 30]
Prints each median in milliseconds and the ratio ours/theirs (target: <= 1.0).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import hostlist  # type: ignore[import-untyped,import-not-found,unused-ignore]  # python-hostlist: the baseline

from ddpctl.slurm.hostlist import expand

EXPRESSION = "gpu-a[00001-20000],b[1-50]c[1-40],x"


def _timed(func: Callable[[str], list[str]]) -> float:
    start = time.perf_counter()
    func(EXPRESSION)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    ours_hosts = expand(EXPRESSION)
    theirs_hosts = hostlist.expand_hostlist(EXPRESSION)
    if ours_hosts != theirs_hosts:
        raise SystemExit("the two parsers disagree on the benchmark input")
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(rounds):
        # Alternate which one goes first so neither always runs on a warmer cache.
        pair = (ours, expand), (theirs, hostlist.expand_hostlist)
        for samples, func in pair if i % 2 == 0 else reversed(pair):
            samples.append(_timed(func))
    ours_ms = statistics.median(ours) * 1e3
    theirs_ms = statistics.median(theirs) * 1e3
    print(f"input: {EXPRESSION!r} ({len(ours_hosts)} hosts), {rounds} rounds each, interleaved")
    print(f"ddpctl.slurm.hostlist.expand   median {ours_ms:9.3f} ms")
    print(f"hostlist.expand_hostlist       median {theirs_ms:9.3f} ms")
    print(f"ratio ours/theirs {ours_ms / theirs_ms:.3f} (target <= 1.0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
