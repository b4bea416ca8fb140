"""Where a long command's time goes on this machine: run it and sample every process's CPU time.

    python benchmarks/ci_cpu_profile.py [--every 2] [--marks LOG] -- bash .ci/run

Every `--every` seconds it reads /proc/stat (how busy the cores were) and each process's utime+stime, and adds
each process's growth to a kind named by its command line (rank processes, torchrun agents, `ddpctl` commands,
pytest workers, Slurm daemons, ...). A process that starts and ends between two samples is not seen: its CPU is
counted as "between samples". With `--marks LOG`, the command's output goes to LOG too, and the lines starting
with "== " (.ci/run's phase headings) split the figures into phases. Prints one table per phase: wall time, the
cores' busy share, and CPU seconds per kind.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")
KINDS = (  # first match wins: (kind, substrings of the command line)
    ("rank process", ("ddpctl.node.worker", "train.py")),
    ("torchrun agent", ("torch.distributed.run", "torchrun")),
    ("ddpctl command", ("-m ddpctl", "bin/ddpctl")),
    ("pytest", ("pytest", "xdist")),
    ("slurm daemons", ("slurmctld", "slurmd", "slurmstepd", "munged")),
    ("install and lint", ("pip", "ruff", "mypy")),
)


def kind_of(cmdline: str) -> str:
    return next((kind for kind, marks in KINDS if any(m in cmdline for m in marks)), "other")


def pids() -> list[str]:
    return [entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def cpu_of(pid: str) -> tuple[float, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / HZ, cmd


def busy_total() -> tuple[float, float]:
    cpu = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    values = [int(v) / HZ for v in cpu[:8]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def phase_of(marks: Path | None, current: str) -> str:
    if marks is None or not marks.exists():
        return current
    heads = [line for line in marks.read_text(errors="replace").splitlines() if line.startswith("== ")]
    return heads[-1][3:60] if heads else current


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--marks", type=Path, help="also write the command's output here; '== ' lines mark phases")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    # What ran before the command (daemons, shells) counts only by its growth from here.
    seen = {pid: got[0] for pid in pids() if (got := cpu_of(pid)) is not None}
    out = args.marks.open("w") if args.marks else None
    proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if out else None)
    table: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    busy0, all0 = busy_total()
    phase, t0 = "start", time.monotonic()
    while proc.poll() is None:
        time.sleep(args.every)
        phase = phase_of(args.marks, phase)
        row = table[phase]
        for pid in pids():
            got = cpu_of(pid)
            if got is not None:
                row[kind_of(got[1])] += got[0] - seen.get(pid, 0.0)
                seen[pid] = got[0]
        busy1, all1 = busy_total()
        row["(busy)"] += busy1 - busy0
        row["(capacity)"] += all1 - all0
        row["(wall)"] += time.monotonic() - t0
        busy0, all0, t0 = busy1, all1, time.monotonic()
    report(table)
    return proc.returncode


def report(table: dict[str, dict[str, float]]) -> None:
    for phase, row in table.items():
        busy, capacity, wall = row.pop("(busy)"), row.pop("(capacity)"), row.pop("(wall)")
        seen = sum(row.values())
        print(f"\n## {phase}: {wall / 60:.1f} min wall, cores {100 * busy / max(capacity, 1e-9):.0f} % busy")
        for kind, cpu in sorted(row.items(), key=lambda kv: -kv[1]):
            print(f"  {kind:<18} {cpu:8.0f} s CPU  {100 * cpu / max(busy, 1e-9):5.1f} %")
        print(f"  {'between samples':<18} {max(busy - seen, 0):8.0f} s CPU  (processes shorter than a sample)")


if __name__ == "__main__":
    sys.exit(main())
