"""Benchmark `ddpctl logs -f` against `tail -F -q` on the same rank files, in the same run.

    python benchmarks/bench_logs_follow.py [--files 256] [--writers 8] [--rate 50000] [--seconds 10]
                                           [--saturate] [--times] [--poll] [--idle-files 1024] [--idle-seconds 30]

Phase 1 (throughput and latency): FILES empty rank logs in a run dir registered in a throw-away DDPCTL_HOME.
Both followers are started on them at the same time and run concurrently, each reading every file; one marker
line is appended and each follower's start-up is reported as the time until it showed it ("ready"); then WRITERS
processes (each owning FILES/WRITERS files) append lines at a fixed total RATE for SECONDS, one O_APPEND write per
line, round-robin over their files. Every line carries its write time ("T=<unix time>"). The benchmark reads both
followers' stdout in big chunks and stamps each chunk with its arrival time; a line's latency is arrival time
minus its embedded write time. Throughput "end to end" is lines delivered / (last arrival - first write): at a
fixed rate a follower that keeps up delivers the offered rate, less the time it needs to deliver the last line;
"first-to-last" is (lines - 1) / (last arrival - first arrival), the rate with each follower's own latency taken
out.
With --times the writers also append each line's write time to the log's `.times` sidecar, as ddpctl's stamper
does on the nodes, so `logs -f` merges the ranks by write time (the path a real job's logs take); every
follower's output is checked for lines shown after a later-written one ("out of time order"). With
--saturate (phase 1b) the writers also run once more unthrottled, as fast as they can, for SECONDS: there the
throughput shows how many lines/s each follower can deliver at most. tail delivers every line; `ddpctl logs -f`
delivers every line exactly once or, where it fell behind the writers by more than its bound, counts it in a
"skipped N lines" note (ddpctl.logs.behind; --no-skip turns that off). Its row gives the lines shown and the
lines skipped; the ratio is given for the lines shown and for shown + skipped ("accounted"). "out of time
order" is the number of lines shown after a later-written one, and "by up to" the largest such gap (the
ordering window bounds it where nothing was skipped past).

Phase 2 (idle cost): IDLE_FILES rank logs that never change; `ddpctl logs -f` follows them for IDLE_SECONDS
after a 3 s settle; CPU is the follower's utime+stime from /proc/<pid>/stat (tail's is shown for reference).

On a local filesystem `ddpctl logs -f` wakes on inotify events; --poll makes it poll instead (as it always
does on NFS/Lustre, where events never arrive), to measure that path on the same machine.

No scheduler is involved: the job's state comes from the registry record's final_state, which `ddpctl logs`
takes at its word. It says RUNNING while the benchmark runs; a COMPLETED line appended at the end makes
`ddpctl logs -f` drain and exit by itself. tail is stopped with SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WRITER = r"""
import os, sys, time
paths, rate, seconds, start, wid = sys.argv[1].split(","), float(sys.argv[2]), float(sys.argv[3]), \
    float(sys.argv[4]), sys.argv[5]
timed = sys.argv[6] == "1"
fds = [os.open(p, os.O_WRONLY | os.O_APPEND) for p in paths]
tfds = [os.open(p[: -len(".log")] + ".times", os.O_WRONLY | os.O_APPEND) for p in paths] if timed else []
ends = [os.fstat(fd).st_size for fd in fds]  # the log's own offsets (one file already holds the marker line)
pad = "x" * 60
while time.time() < start:
    time.sleep(0.001)
n = 0
while True:
    now = time.time()
    if now - start >= seconds:
        break
    due = int((now - start) * rate) if rate > 0 else n + 500
    while n < due:
        k, when = n % len(fds), time.time()
        line = f"T={when:.6f} w{wid} n{n} {pad}\n".encode()
        os.write(fds[k], line)
        if timed:  # as ddpctl's stamper does: the bytes, then their write time in the .times sidecar
            ends[k] += len(line)
            os.write(tfds[k], b"%d %.6f\n" % (ends[k], when))
        n += 1
    if rate > 0:
        time.sleep(0.002)
print(n)
"""
STAMP = re.compile(rb"T=(\d+\.\d+)")
SKIPPED = re.compile(rb"\[ddpctl\] -f fell behind [^\n]*?: skipped ([\d,]+) lines")


def ddpctl_argv() -> list[str]:
    return [sys.executable, "-m", "ddpctl", "logs"]


def make_job(home: Path, name: str, files: int, ranks_per_node: int = 8, timed: bool = False) -> list[Path]:
    run_dir = home / "runs" / name / "1"
    attempt = run_dir / "attempt-0"
    attempt.mkdir(parents=True)
    for k in range(0, files, ranks_per_node):
        info = {
            "node": f"node{k // ranks_per_node}",
            "node_rank": k // ranks_per_node,
            "ranks": list(range(k, min(k + ranks_per_node, files))),
        }
        (attempt / f"node-{k // ranks_per_node}.json").write_text(json.dumps(info))
    paths = [attempt / f"rank-{r}.log" for r in range(files)]
    for path in paths:
        path.touch()
        if timed:
            path.with_suffix(".times").touch()
    set_state(home, name, run_dir, "RUNNING")
    return paths


def set_state(home: Path, name: str, run_dir: Path, state: str) -> None:
    line = {
        "job_id": name,
        "name": name,
        "run_dir": str(run_dir),
        "backend": "local",
        "submitted_at": 1.0,
        "final_state": state,
    }
    with (home / "registry.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")


class Capture(threading.Thread):
    """Reads a follower's stdout in chunks, stamping each chunk with its arrival time."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        self.proc = proc
        self.chunks: list[tuple[float, bytes]] = []
        self.lines = 0
        self.skipped = 0  # lines `logs -f` said it skipped
        self.notes = 0  # the lines saying so
        self.started = time.time()

    def run(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        pending = b""
        while chunk := os.read(fd, 1 << 20):
            self.chunks.append((time.time(), chunk))
            data = pending + chunk
            cut = data.rfind(b"\n") + 1
            pending = data[cut:]
            for found in SKIPPED.finditer(data, 0, cut):
                self.skipped += int(found.group(1).replace(b",", b""))
                self.notes += 1
            self.lines += chunk.count(b"\n")

    @property
    def accounted(self) -> int:
        """Lines shown or counted in a skip note."""
        return self.lines - self.notes + self.skipped

    def out_of_order(self) -> tuple[int, float]:
        """Lines shown after a line written later (by the write time each carries), and the largest such gap."""
        latest, count, gap = 0.0, 0, 0.0
        for stamp in STAMP.findall(b"".join(chunk for _, chunk in self.chunks)):
            when = float(stamp)
            if when < latest:
                count += 1
                gap = max(gap, latest - when)
            latest = max(latest, when)
        return count, gap

    def latencies(self) -> tuple[list[float], float, int]:
        """Per stamped line: arrival - write time; also the last arrival and the number of stamped lines."""
        lats: list[float] = []
        last, pending = 0.0, b""
        for arrived, chunk in self.chunks:
            data = pending + chunk
            cut = data.rfind(b"\n") + 1
            pending = data[cut:]
            stamps = STAMP.findall(data[:cut])
            if stamps:
                lats.extend(arrived - float(s) for s in stamps)
                last = arrived
        return lats, last, len(lats)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def start_followers(
    home: Path, name: str, paths: list[Path], poll: bool, no_skip: bool = False
) -> dict[str, subprocess.Popen[bytes]]:
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    tail = shutil.which("tail") or "tail"
    extra = (["--poll"] if poll else []) + (["--no-skip"] if no_skip else [])
    return {
        "ddpctl logs -f": subprocess.Popen(
            [*ddpctl_argv(), name, "-f", "--no-color", *extra], env=env, stdout=subprocess.PIPE
        ),
        "tail -F -q": subprocess.Popen(
            [tail, "-F", "-q", "-n", "+1", *map(str, paths)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        ),
    }


def wait_ready(path: Path, captures: dict[str, Capture], timed: bool, timeout: float = 120.0) -> dict[str, float]:
    """Append one marker line and wait until every follower has shown it: the writers start on followers that
    are following, so a follower's own start-up (a Python process importing ddpctl, seconds on a loaded machine
    without bytecode) is reported apart and not counted as the latency of the lines written after it."""
    started = time.time()
    with path.open("ab") as f:
        f.write(b"ready\n")
    if timed:  # with its write time, or `logs -f` holds it back until the writer is gone (ddpctl.logs.stamps)
        with path.with_suffix(".times").open("ab") as f:
            f.write(b"%d %.6f\n" % (path.stat().st_size, time.time()))
    ready: dict[str, float] = {}
    while len(ready) < len(captures) and time.time() - started < timeout:
        for label, capture in captures.items():
            if label not in ready and capture.lines >= 1:
                ready[label] = time.time() - capture.started
        time.sleep(0.01)
    return ready


def run_writers(paths: list[Path], writers: int, rate: float, seconds: float, timed: bool = False) -> tuple[float, int]:
    start = time.time() + 1.0
    share = len(paths) // writers
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                ",".join(map(str, paths[w * share : (w + 1) * share])),
                str(rate / writers),
                str(seconds),
                str(start),
                str(w),
                "1" if timed else "0",
            ],
            stdout=subprocess.PIPE,
        )
        for w in range(writers)
    ]
    total = sum(int(p.communicate()[0]) for p in procs)
    return start, total


def throughput_phase(args: argparse.Namespace, home: Path, name: str, rate: float) -> None:
    paths = make_job(home, name, args.files, timed=args.times)
    followers = start_followers(home, name, paths, args.poll, args.no_skip)
    captures = {label: Capture(proc) for label, proc in followers.items()}
    for capture in captures.values():
        capture.start()
    ready = wait_ready(paths[0], captures, args.times)
    cpu0 = {label: cpu_seconds(p.pid) for label, p in followers.items()}
    first_write, total = run_writers(paths, args.writers, rate, args.seconds, args.times)
    deadline = time.time() + 30
    while any(c.accounted < total + 1 for c in captures.values()) and time.time() < deadline:
        time.sleep(0.1)
    cpu = {label: cpu_seconds(p.pid) - cpu0[label] for label, p in followers.items()}
    set_state(home, name, paths[0].parent.parent, "COMPLETED")
    followers["tail -F -q"].terminate()
    exit_code = followers["ddpctl logs -f"].wait(30)
    for capture in captures.values():
        capture.join(10)
    offered = f"{rate:.0f} lines/s" if rate > 0 else "unthrottled"
    mode = ("polling" if args.poll else "inotify") + (", --no-skip" if args.no_skip else "")
    print(
        f"phase 1 ({name}, ddpctl {mode}): {args.files} files, {args.writers} writers, {offered} for "
        f"{args.seconds:.0f} s, {total} lines written{' with .times' if args.times else ''}; followers run concurrently"
    )
    print(
        "  ready (start-up until the marker line was shown): " + ", ".join(f"{k} {v:.2f} s" for k, v in ready.items())
    )
    report(captures, cpu, first_write, total)
    print(f"  ddpctl logs -f exited by itself with status {exit_code} after the job was marked COMPLETED")


def report(captures: dict[str, Capture], cpu: dict[str, float], first_write: float, total: int) -> None:
    stats = {}
    for label, capture in captures.items():
        lats, last, count = capture.latencies()
        rate = count / (last - first_write) if last > first_write else 0.0
        first = min((t for t, _ in capture.chunks), default=last)
        steady = (count - 1) / (last - first) if last > first else 0.0
        span = last - first_write
        accounted = (count + capture.skipped) / span if span > 0 else 0.0
        p50, p95, top = percentile(lats, 0.5), percentile(lats, 0.95), max(lats, default=float("nan"))
        stats[label] = (rate, p50, p95, top, steady, accounted)
        disorder, gap = capture.out_of_order()
        print(
            f"  {label:15s} delivered {count:8d}/{total} lines, skipped {capture.skipped} ({capture.notes} notes)  "
            f"{rate:9.0f} lines/s end to end ({accounted:.0f} accounted)  {steady:9.0f} first-to-last  "
            f"p50 {stats[label][1]:.3f} s  p95 {stats[label][2]:.3f} s  max {stats[label][3]:.3f} s  "
            f"cpu {cpu[label]:.2f} s  out of time order {disorder} (by up to {gap:.3f} s)"
        )
    ours, theirs = stats["ddpctl logs -f"], stats["tail -F -q"]
    print(
        f"  ratio ddpctl/tail: throughput {ours[0] / theirs[0]:.3f}x end to end (lines shown), "
        f"{ours[5] / theirs[5]:.3f}x accounted (shown + skipped), {ours[4] / theirs[4]:.3f}x first-to-last "
        f"(target >= 0.9); p95 latency {ours[2]:.3f} s vs {theirs[2]:.3f} s (target <= 1 s)"
    )


def idle_phase(args: argparse.Namespace, home: Path) -> None:
    paths = make_job(home, "idle", args.idle_files)
    for path in paths:
        path.write_bytes(b"ready\n")
    followers = start_followers(home, "idle", paths, args.poll)
    time.sleep(3.0)
    before = {label: cpu_seconds(p.pid) for label, p in followers.items()}
    time.sleep(args.idle_seconds)
    used = {label: cpu_seconds(p.pid) - before[label] for label, p in followers.items()}
    for proc in followers.values():
        proc.terminate()
        proc.wait(10)
    mode = "polling" if args.poll else "inotify"
    print(f"phase 2 (ddpctl {mode}): {args.idle_files} idle files followed for {args.idle_seconds:.0f} s")
    for label, seconds in used.items():
        print(f"  {label:15s} cpu {seconds:.3f} s ({100 * seconds / args.idle_seconds:.2f} % of one core)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=256)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rate", type=float, default=50_000, help="total lines per second")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--saturate", action="store_true", help="also run the writers unthrottled")
    parser.add_argument(
        "--times", action="store_true", help="writers also record write times (.times), as ddpctl's stamper does"
    )
    parser.add_argument("--poll", action="store_true", help="run `ddpctl logs -f --poll` (no inotify)")
    parser.add_argument("--no-skip", action="store_true", help="run `ddpctl logs -f --no-skip` (show every line)")
    parser.add_argument("--idle-files", type=int, default=1024)
    parser.add_argument("--idle-seconds", type=float, default=30)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    try:
        throughput_phase(args, home, "fixed-rate", args.rate)
        if args.saturate:
            throughput_phase(args, home, "saturated", 0)
        if args.idle_seconds > 0:
            idle_phase(args, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
