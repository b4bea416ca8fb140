"""The control plane at 2..64 nodes on the local Slurm cluster, training played by the torch-free stand-in.

    sudo DDPCTL_TEST_NODES=64 bash tests/cluster/start.sh     # partition `scale` spans every node
    python benchmarks/bench_scale.py [--nodes 2,8,32,64] [--ranks-per-node 8] [--dry-run-nodes 10000]
    python benchmarks/bench_scale.py --nodes 64 --watchdog-only      # no cluster: the watchdog's poll only

Per size, one job (`ddpctl submit`, sbatch backend, partition `scale`) whose nodes each run `ddpctl launch` ->
`ddpctl.node.standin` (spec env DDPCTL_STANDIN=1) playing RANKS ranks that log one stamped line per step
(every 0.1 s). Measured, with every other part the real code:
- launched:  `ddpctl submit` started -> the last node's `launch` event (includes Slurm's scheduling: bf_interval=1);
- fan-out:   `ddpctl preempt` started -> the last node's stand-in saw the stop (its own flag: signal or stop file,
             or the other nodes' agreement file, counted as "via agreement"); a node's stand-in marks all its
             ranks at once, so this is "every rank saw it"; also from the batch shell's `signal` event;
- decision:  the last `node-exit` event -> the `decision` event (the batch shell's `internal decide`);
- status:    `ddpctl status JOB` as a fresh process, median of 3;
- logs -f:   `ddpctl logs -f JOB` and `tail -F -q` on every rank file, side by side for --follow-s seconds
             while the job runs: lines written after both started that each delivered per second, and latency;
- dry run:   `ddpctl submit --dry-run` of the same spec (no cluster), and at --dry-run-nodes.
- watchdog:  one node's poll of the job's progress (no cluster; --watchdog-only for just this), over NODES x RANKS
             records on disk, alternately: every record read (the old watchdog, health.records.progress_records)
             vs its own ranks' records plus one summary per other node (health.summary.JobView, after every node
             wrote its summary once); files opened per poll and the median poll time.
Then the job is cancelled (the requeue itself is the 16-node test's business). Prints a table and the growth of
each figure from the smallest to the largest size. Not for CI: a 64-node run takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_logs_follow import Capture, percentile

REPO = Path(__file__).resolve().parent.parent
STANDIN = REPO / "ddpctl" / "node" / "standin.py"
STAMP = re.compile(rb"T=(\d+\.\d+)")
POLL_S = 0.02


def ddpctl(home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "ddpctl", *args],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def write_spec(home: Path, nodes: int, ranks: int, backend: str = "sbatch") -> Path:
    spec = {
        "name": f"scale{nodes}",
        "script": str(STANDIN),
        "nodes": nodes,
        "nproc_per_node": ranks,
        "time": "00:20:00",
        "partition": "scale",
        "backend": backend,
        "args": ["--steps", "100000", "--step-s", "0.1"],
        "env": {"DDPCTL_STANDIN": "1"},
        "requeue": {"enabled": True, "signal": "USR2", "lead_s": 60, "max_preemptions": 3},
    }
    path = home / f"scale{nodes}.json"  # JSON is YAML
    path.write_text(json.dumps(spec))
    return path


def events(run_dir: Path) -> list[dict[str, Any]]:
    try:
        text = (run_dir / "events.jsonl").read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def wait_until(what: str, predicate: Any, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(POLL_S)
    raise SystemExit(f"bench_scale: timed out after {timeout} s waiting for {what}")


def last_of(run_dir: Path, name: str, count: int) -> float | None:
    found = [e["t"] for e in events(run_dir) if e["event"] == name and e.get("attempt") == 0]
    return max(found) if len(found) >= count else None


def follow(home: Path, job: str, paths: list[Path], seconds: float) -> dict[str, tuple[float, float, float]]:
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    procs = {
        "ddpctl": subprocess.Popen(
            [sys.executable, "-m", "ddpctl", "logs", job, "-f", "--no-color"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ),
        "tail": subprocess.Popen(
            [shutil.which("tail") or "tail", "-F", "-q", "-n", "0", *map(str, paths)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ),
    }
    captures = {k: Capture(p) for k, p in procs.items()}
    for c in captures.values():
        c.start()
    time.sleep(2.0)  # both started and caught up; count only lines written from here on
    start = time.time()
    time.sleep(seconds)
    end = time.time()
    time.sleep(1.0)  # let both deliver lines written just before the end
    for p in procs.values():
        p.terminate()
        p.wait(10)
    result = {}
    for label, capture in captures.items():
        lats = []
        for arrived, chunk in capture.chunks:
            lats += [arrived - float(s) for s in STAMP.findall(chunk) if start <= float(s) < end]
        result[label] = (len(lats) / (end - start), percentile(lats, 0.5), percentile(lats, 0.95))
    return result


def one_size(home: Path, nodes: int, ranks: int, follow_s: float) -> dict[str, float]:
    spec = write_spec(home, nodes, ranks)
    t0 = time.time()
    out = ddpctl(home, "submit", str(spec))
    if out.returncode != 0:
        raise SystemExit(f"bench_scale: submit failed: {out.stdout}{out.stderr}")
    job = out.stdout.split("job ", 1)[1].split()[0]
    run_dir = Path(out.stdout.split("run dir:", 1)[1].split()[0])
    try:
        launched = wait_until(f"{nodes} launches", lambda: last_of(run_dir, "launch", nodes)) - t0
        logs = [run_dir / "attempt-0" / f"rank-{r}.log" for r in range(nodes * ranks)]
        wait_until("every rank's first line", lambda: all(p.exists() for p in logs), timeout=120)
        status = []
        for _ in range(3):
            s0 = time.perf_counter()
            ddpctl(home, "status", job)
            status.append(time.perf_counter() - s0)
        followed = follow(home, job, logs, follow_s)
        asked = time.time()
        ddpctl(home, "preempt", job)
        seen_dir = run_dir / "attempt-0" / "standin"
        wait_until("every node's stop", lambda: len(list(seen_dir.glob("seen-node-*.json"))) >= nodes, timeout=120)
        seen = [json.loads(p.read_text()) for p in seen_dir.glob("seen-node-*.json")]
        signalled = wait_until("the signal event", lambda: last_of(run_dir, "signal", 1))
        exited = wait_until("every node's exit", lambda: last_of(run_dir, "node-exit", nodes), timeout=120)
        decided = wait_until("the decision", lambda: last_of(run_dir, "decision", 1), timeout=120)
        return {
            "launched": launched,
            "fanout": max(s["t"] for s in seen) - asked,
            "shell_fanout": max(s["t"] for s in seen) - signalled,
            "indirect": sum(s["source"] == "another node" for s in seen),
            "decision": decided - exited,
            "stop_to_decision": decided - asked,
            "status": statistics.median(status),
            "logs_rate": followed["ddpctl"][0],
            "tail_rate": followed["tail"][0],
            "logs_p95": followed["ddpctl"][2],
            "tail_p95": followed["tail"][2],
        }
    finally:
        cancel(job)


def cancel(job: str) -> None:
    """scancel until squeue no longer lists the job: a cancel that lands between the decision and the batch
    shell's `scontrol requeue` is undone by the requeue."""
    for _ in range(60):
        subprocess.run(["scancel", job], check=False)
        time.sleep(1.0)
        listed = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, check=False)
        if not listed.stdout.strip():
            return
    print(f"bench_scale: job {job} still listed by squeue after 60 cancels", file=sys.stderr)


def dry_run_s(home: Path, nodes: int, ranks: int) -> float:
    spec = write_spec(home, nodes, ranks)
    t0 = time.perf_counter()
    out = ddpctl(home, "submit", "--dry-run", str(spec))
    if out.returncode != 0:
        raise SystemExit(f"bench_scale: dry run failed: {out.stderr}")
    return time.perf_counter() - t0


COLUMNS = [
    ("launched", "submit->all launched s", "{:.2f}"),
    ("fanout", "stop->every rank saw s", "{:.2f}"),
    ("shell_fanout", "shell signal->all saw s", "{:.2f}"),
    ("indirect", "nodes via agreement", "{:.0f}"),
    ("decision", "last exit->decision s", "{:.2f}"),
    ("stop_to_decision", "stop->decision s", "{:.2f}"),
    ("status", "status s", "{:.2f}"),
    ("logs_rate", "logs -f lines/s", "{:.0f}"),
    ("tail_rate", "tail -F lines/s", "{:.0f}"),
    ("logs_p95", "logs -f p95 s", "{:.2f}"),
    ("tail_p95", "tail p95 s", "{:.2f}"),
    ("dry_run", "dry run s", "{:.2f}"),
]


def report(rows: dict[int, dict[str, float]]) -> None:
    sizes = sorted(rows)
    print("figure".ljust(24) + "".join(f"{n:>10d}" for n in sizes) + f"{'growth':>10s}")
    for key, label, fmt in COLUMNS:
        if not all(key in rows[n] for n in sizes):
            continue
        cells = "".join(f"{fmt.format(rows[n][key]):>10s}" for n in sizes)
        first, last = rows[sizes[0]][key], rows[sizes[-1]][key]
        growth = f"{last / first:.1f}x" if first else "-"
        print(label.ljust(24) + cells + f"{growth:>10s}")
    big = rows[sizes[-1]]
    if big.get("tail_rate"):
        print(
            f"logs -f / tail throughput at {sizes[-1]} nodes: {big['logs_rate'] / big['tail_rate']:.2f}x "
            "(target >= 1.0)"
        )
    print(f"(nodes {sizes[0]} -> {sizes[-1]}: {sizes[-1] / sizes[0]:.0f}x; load average {os.getloadavg()[0]:.1f})")


def watchdog_poll(nodes: int, ranks: int, rounds: int = 15) -> dict[str, float]:
    """One node's poll of NODES x RANKS progress records: the old reader (every record) vs the node view."""
    from ddpctl import safeio
    from ddpctl.health.records import progress_records
    from ddpctl.health.summary import JobView, Seat
    from ddpctl.run.layout import RunLayout

    with tempfile.TemporaryDirectory(prefix="bench-watchdog-") as scratch:
        layout = RunLayout(Path(scratch))
        layout.attempt_dir(0).mkdir(parents=True)
        now = time.time()
        for rank in range(nodes * ranks):
            record = {"step": 7, "t": now, "started": now - 60, "written": now, "phase": "train",
                      "node": f"n{rank // ranks}", "step_s": 0.1, "busy_s": 0.05, "window": 20,
                      "history": [0.1] * 20, "samples": 32}  # fmt: skip
            safeio.write_json_atomic(layout.progress_file(0, rank), record)
        opened: list[Path] = []

        def counting(path: Path) -> dict[str, Any] | None:
            opened.append(path)
            return safeio.read_json(path)

        frozen = time.monotonic()  # every summary stays fresh while we measure (no node stops here)
        views = [JobView(Seat(layout, 0, f"n{n}", n, nodes), clock=lambda: frozen) for n in range(nodes)]
        for view in views:
            view.records()  # each node publishes its summary
        me = JobView(Seat(layout, 0, "n1", 1, nodes), read=counting, clock=lambda: frozen)
        me.records()
        old_t, new_t, old_n, new_n = [], [], 0, 0
        for _ in range(rounds):
            t0 = time.perf_counter()
            old_n = len(progress_records(layout, 0))  # it opens every progress-<rank>.json it lists
            old_t.append(time.perf_counter() - t0)
            opened.clear()
            t0 = time.perf_counter()
            me.records()
            new_t.append(time.perf_counter() - t0)
            new_n = len(opened)
    old_s, new_s = statistics.median(old_t), statistics.median(new_t)
    print(
        f"watchdog poll at {nodes} x {ranks}: files opened per node per poll {old_n} -> {new_n} "
        f"(target <= {nodes} + {ranks}); poll {old_s * 1000:.1f} ms -> {new_s * 1000:.1f} ms "
        f"(ratio {new_s / old_s:.2f}); load average {os.getloadavg()[0]:.1f}"
    )
    return {"watchdog_old_opens": old_n, "watchdog_opens": new_n, "watchdog_old_s": old_s, "watchdog_s": new_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="2,8,32,64")
    parser.add_argument("--ranks-per-node", type=int, default=8)
    parser.add_argument("--follow-s", type=float, default=3.0)
    parser.add_argument("--dry-run-nodes", type=int, default=10_000, help="0: skip")
    parser.add_argument("--dry-run-only", action="store_true", help="no cluster: only the dry runs")
    parser.add_argument("--watchdog-only", action="store_true", help="no cluster: only the watchdog poll")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    watchdog_poll(sizes[-1], args.ranks_per_node)
    if args.watchdog_only:
        return
    home = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    rows: dict[int, dict[str, float]] = {}
    try:
        for nodes in sizes:
            rows[nodes] = {} if args.dry_run_only else one_size(home, nodes, args.ranks_per_node, args.follow_s)
            rows[nodes]["dry_run"] = dry_run_s(home, nodes, args.ranks_per_node)
            print(f"{nodes} nodes: " + ", ".join(f"{k} {v:.3f}" for k, v in rows[nodes].items()), flush=True)
        report(rows)
        if args.dry_run_nodes:
            took = dry_run_s(home, args.dry_run_nodes, args.ranks_per_node)
            print(f"dry run at {args.dry_run_nodes} nodes: {took:.2f} s (target <= 1 s)")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
