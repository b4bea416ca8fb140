"""Node loss on Slurm: a node of a running 2-node job dies; ddpctl vs the hand-written sbatch + srun + torchrun job.

Both sides train jobs/example/train.py (2 nodes x 2 ranks, Gloo on CPU, a checkpoint every 2 steps). Once the job
has done a few steps, the node that is not the batch host dies the way tests/integration/test_node_loss_slurm.py
kills it (tests/nodefault.py: its slurmd and every process of the job on it SIGKILLed), and the timeline is taken:

- ddpctl (`ddpctl submit jobs/example.yaml` in partition `scale`, away from the spare side's nodes by
  `sbatch.exclude`, so free nodes exist: the next attempt is a successor job that excludes the dead node):
  node death -> the surviving ranks exited (their `rank-exit` events) -> node found lost (`node-lost`) -> all
  ranks stopped (the surviving node's `node-exit`: its launcher and every rank under it gone; the dead node's ranks
  died with it) -> decision (`decision`) -> first resumed training step (the first point of each rank's progress
  history in the resumed attempt; the last rank's). Every time after the fault comes from the run dir's own
  records (events.jsonl, attempt-<n>/progress-<rank>.json), not from polling. The node stays dead until the
  next attempt trained (Slurm gives up on it only after SlurmdTimeout, 300 s by default).
- ddpctl with a spare (`spare_nodes: 1` in partition `scale`, limited to node3..node6 by `sbatch.exclude`, away
  from the other sides' nodes): the same timeline, the next attempt started inside the same job on the survivor
  and the spare (no requeue); the dead node is brought back only after that.
- hand-written: one `srun` task per node, each running torchrun with a static rendezvous (MASTER_ADDR from
  `scontrol show hostnames`); each task echoes the time its torchrun exited. Measured: node death -> the
  surviving ranks exited (their torchrun's exit: the job's own record), -> the step ended and -> the job left
  RUNNING (squeue, every 0.2 s: Slurm keeps no finer record). Slurm ends them only once the node is declared down
  (SlurmdTimeout) or the time limit passes, so this side is bounded by --timeout and says "did not end within N s".

Ratio: hand-written / ddpctl for node death -> all ranks stopped (for the hand-written job: its step ended, the
moment Slurm counts every task stopped and its nodes could be used again). Each round restores the killed node the
way the test's teardown does (start.sh, then until both nodes run a step again) and cancels the jobs it submitted.

    python benchmarks/bench_node_loss.py [--rounds 1] [--timeout 180] [--sleep-per-step 0.5] [--keep]

Needs the local test cluster (`sudo bash tests/cluster/start.sh`); run it as root (it kills and restarts a slurmd).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))  # the node-loss test's fault helpers (tests/nodefault.py)

from bench_first_step import (  # noqa: E402  (after the path insert, as the other benchmarks)
    POLL_S,
    Jobs,
    cancel_and_wait,
    load_average,
    queue_state,
    require_cluster,
    run,
    torchrun_path,
    wait_cluster_idle,
)
from nodefault import kill_node, restore_nodes, wait_nodes_run_step  # noqa: E402
from slurmtools import STATE_DIR, job_info, use_slurm_version  # noqa: E402

SPEC = ROOT / "jobs" / "example.yaml"
TRAIN_PY = ROOT / "jobs" / "example" / "train.py"
FAULT_AT_STEP = 5  # after the checkpoint of step 4
RANKS = 4
STEP_LINE = re.compile(r"^\[example\] step (\d+)/", re.M)
TORCHRUN_EXIT = re.compile(r"^torchrun exited (\d+) t=([\d.]+) node=(\S+)$", re.M)


WITH_SPARE = "ddpctl+spare"
SIDES = ("ddpctl", WITH_SPARE, "hand-written")


def train_args(sleep: float) -> list[str]:
    return ["--epochs", "2", "--steps-per-epoch", "10", "--ckpt-every", "2", "--sleep-per-step", f"{sleep:g}"]


def read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def wait_until(predicate: Callable[[], bool], job_id: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise SystemExit(f"job {job_id}: no {what} within {timeout:.0f} s")
        time.sleep(POLL_S)


def slurmd_timeout() -> str:
    found = re.search(r"^SlurmdTimeout\s*=\s*(.+)$", run(["scontrol", "show", "config"]).stdout, re.M)
    return found.group(1).strip() if found else "?"


@dataclass
class Round:
    side: str
    job_id: str
    victim: str = ""
    rows: dict[str, float | None] = field(default_factory=dict)  # label -> seconds after the fault (None: never)
    notes: list[str] = field(default_factory=list)


# --- ddpctl ------------------------------------------------------------------------------------------------


def events(run_dir: Path) -> list[dict[str, Any]]:
    found = []
    for line in read(run_dir / "events.jsonl").splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return found


def first_event(run_dir: Path, name: str, **match: object) -> dict[str, Any] | None:
    return next((e for e in events(run_dir) if e.get("event") == name and match.items() <= e.items()), None)


def progress(run_dir: Path, attempt: int) -> list[dict[str, Any]]:
    records = []
    for path in sorted((run_dir / f"attempt-{attempt}").glob("progress-*.json")):
        try:
            records.append(json.loads(read(path)))
        except ValueError:
            continue
    return records


def resumed_step(run_dir: Path) -> tuple[int, float, int] | None:
    """(attempt, when the last rank finished its first step, that step) of the first later attempt in which
    every rank did a step; from each rank's progress history (points: [t, step, samples])."""
    for attempt in range(1, 10):
        firsts = [r["history"][0] for r in progress(run_dir, attempt) if r.get("history")]
        if len(firsts) == RANKS:
            return attempt, max(p[0] for p in firsts), min(p[1] for p in firsts)
    return None


SPARE = ["spare_nodes=1", "partition=scale", "sbatch.exclude=node[1-2],node[7-16]"]
NO_SPARE = ["partition=scale", "sbatch.exclude=node[3-6]"]  # node1, node2 and free nodes from node7 on


def submit_ddpctl(workdir: Path, jobs: Jobs, sleep: float, side: str) -> tuple[Round, Path]:
    env = {**os.environ, "DDPCTL_HOME": str(workdir / "home")}
    argv = [sys.executable, "-m", "ddpctl", "submit", str(SPEC), "--set", f"run_dir={workdir / 'runs'}"]
    argv += ["--set", f"args={json.dumps(train_args(sleep))}"]
    for item in SPARE if side == WITH_SPARE else NO_SPARE:
        argv += ["--set", item]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"ddpctl submit failed ({done.returncode}): {done.stderr.strip()}")
    rnd = Round(side, jobs.add(done.stdout.split("job ", 1)[1].split()[0]))
    return rnd, Path(done.stdout.split("run dir:", 1)[1].split()[0])


def ddpctl_round(workdir: Path, jobs: Jobs, sleep: float, side: str) -> Round:
    rnd, run_dir = submit_ddpctl(workdir, jobs, sleep, side)

    def trained() -> bool:
        return max((r.get("step") or 0 for r in progress(run_dir, 0)), default=0) >= FAULT_AT_STEP

    wait_until(trained, rnd.job_id, 300, f"training step {FAULT_AT_STEP}")
    rnd.victim = json.loads(read(run_dir / "attempt-0" / "node-1.json"))["node"]  # not the batch host (rank 0)
    fault, _ = kill_node(rnd.victim, rnd.job_id)
    wait_until(lambda: first_event(run_dir, "decision", attempt=0) is not None, rnd.job_id, 120, "decision")
    wait_until(lambda: resumed_step(run_dir) is not None, rnd.job_id, 300, "resumed training step")
    for event in events(run_dir):  # the successor job that carries the run on: cancelled with the round's jobs
        if event.get("event") == "chain-submit":
            jobs.add(str(event["job_id"]))
    ddpctl_timeline(rnd, run_dir, fault)
    return rnd


def ddpctl_timeline(rnd: Round, run_dir: Path, fault: float) -> None:
    """The rows and notes of a ddpctl round, from the run's own records."""
    survivor = json.loads(read(run_dir / "attempt-0" / "node-0.json"))["node"]
    lost = first_event(run_dir, "node-lost", attempt=0)
    stopped = first_event(run_dir, "node-exit", attempt=0, node=survivor)  # the dead node's ranks died with it
    decision = first_event(run_dir, "decision", attempt=0) or {}
    attempt, resumed_at, step = resumed_step(run_dir) or (0, 0.0, 0)
    exits = [
        e["t"]
        for e in events(run_dir)
        if e.get("event") == "rank-exit" and e.get("attempt") == 0 and e.get("node") == survivor
    ]
    rnd.rows["surviving ranks exited"] = max(exits) - fault if exits else None
    rnd.rows["node found lost"] = lost["t"] - fault if lost else None
    rnd.rows["all ranks stopped"] = stopped["t"] - fault if stopped else None
    rnd.rows["decision"] = decision["t"] - fault
    rnd.rows["first resumed step"] = resumed_at - fault
    excluded = [
        f"{e.get('node')} ({'applied' if e.get('applied', True) else 'not applied: ' + str(e.get('why'))})"
        for e in events(run_dir)
        if e.get("event") == "node-excluded"
    ]
    rnd.notes.append(
        f"decision {decision.get('action')}/{decision.get('kind')}, cause {decision.get('cause')} "
        f"{decision.get('cause_node')}; resumed in attempt {attempt}, first step {step}; "
        f"excluded: {', '.join(excluded) or 'none'}"
    )


# --- hand-written ------------------------------------------------------------------------------------------


def handwritten_script(out: Path, sleep: float) -> str:
    # The tutorial pattern: one task per node, torchrun per node with a static rendezvous, node rank from
    # $SLURM_NODEID (single-quoted, so it expands inside each node's task); the echo is this benchmark's record.
    inner = (
        f"{shlex.quote(torchrun_path())} --nnodes=2 --nproc-per-node=2 --node-rank=$SLURM_NODEID "
        f"--master-addr=$MASTER_ADDR --master-port=29500 {shlex.quote(str(TRAIN_PY))} "
        + " ".join(map(shlex.quote, train_args(sleep)))
        + '; echo "torchrun exited $? t=$(date +%s.%N) node=$(hostname)"'
    )
    return "\n".join(
        [
            "#!/bin/bash",
            "#SBATCH --job-name=handwritten-nodeloss",
            "#SBATCH --partition=debug",
            "#SBATCH --nodes=2",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --cpus-per-task=2",
            "#SBATCH --time=00:10:00",
            f"#SBATCH --output={out}/slurm.out",
            f"#SBATCH --chdir={out}",
            "export OMP_NUM_THREADS=1",
            'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)',
            f"srun --ntasks-per-node=1 bash -c {shlex.quote(inner)}",
            "",
        ]
    )


def watch_end(job_id: str, fault: float, timeout: float) -> tuple[float | None, float | None, str]:
    """Seconds from the fault until the job's step 0 left squeue and until the job left RUNNING (None: not
    within `timeout`), and the job's state then."""
    step_end = job_end = None
    state = "RUNNING"
    while time.time() - fault < timeout and (step_end is None or job_end is None):
        steps = run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i"]).stdout.split()
        now = time.time()
        if step_end is None and f"{job_id}.0" not in steps:
            step_end = now - fault
        state = queue_state(job_id)[0]
        if job_end is None and state != "RUNNING":
            job_end = now - fault
        time.sleep(POLL_S)
    return step_end, job_end, state or "gone"


def handwritten_round(workdir: Path, jobs: Jobs, sleep: float, timeout: float) -> Round:
    out = workdir / "handwritten"
    out.mkdir()
    (out / "job.sh").write_text(handwritten_script(out, sleep))
    done = run(["sbatch", "--parsable", str(out / "job.sh")], cwd=out)
    if done.returncode != 0:
        raise SystemExit(f"sbatch of the hand-written job failed: {done.stderr.strip()}")
    rnd = Round("hand-written", jobs.add(done.stdout.strip().split(";")[0]))
    log = out / "slurm.out"

    def trained() -> bool:
        return max((int(s) for s in STEP_LINE.findall(read(log))), default=0) >= FAULT_AT_STEP

    wait_until(trained, rnd.job_id, 300, f"training step {FAULT_AT_STEP}")
    info = job_info(rnd.job_id)
    nodes = run(["scontrol", "show", "hostnames", info.get("NodeList", "")]).stdout.split()
    rnd.victim = next(n for n in nodes if n != info.get("BatchHost"))
    fault, _ = kill_node(rnd.victim, rnd.job_id)
    step_end, job_end, state = watch_end(rnd.job_id, fault, timeout)
    exits = [float(t) - fault for _, t, node in TORCHRUN_EXIT.findall(read(log)) if node != rnd.victim]
    rnd.rows["surviving ranks exited"] = min(exits) if exits else None  # their torchrun's exit
    rnd.rows["all ranks stopped"] = step_end  # the step ended: Slurm counts every task stopped
    rnd.rows["job left RUNNING"] = job_end
    rnd.notes.append(f"job state after the watch: {state}; no requeue decision of its own, no resumed step")
    return rnd


# --- rounds and table --------------------------------------------------------------------------------------


def one_round(side: str, workdir: Path, jobs: Jobs, args: argparse.Namespace) -> Round:
    wait_cluster_idle(set(jobs.ids))
    workdir.mkdir(parents=True)
    try:
        if side in ("ddpctl", WITH_SPARE):
            return ddpctl_round(workdir, jobs, args.sleep_per_step, side)
        return handwritten_round(workdir, jobs, args.sleep_per_step, args.timeout)
    finally:
        restore_nodes()  # as the test's teardown: the node back, our jobs cancelled, then a step runs on both
        for job_id in jobs.ids:
            cancel_and_wait(job_id)
        wait_nodes_run_step()


def cell(values: list[float | None], timeout: float) -> str:
    got = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(got) < len(values):
        return f"did not end within {timeout:g} s ({len(values) - len(got)} of {len(values)})"
    return f"{statistics.median(got):.1f} s" + (f" ({min(got):.1f}-{max(got):.1f})" if len(got) > 1 else "")


def summarise(rounds: dict[str, list[Round]], timeout: float) -> None:
    labels = ["surviving ranks exited", "node found lost", "all ranks stopped", "job left RUNNING"]
    labels += ["decision", "first resumed step"]
    print(f"\n{'node death ->':36s} {'ddpctl (successor)':22s} {'ddpctl (spare)':22s} hand-written sbatch + torchrun")
    for label in labels:
        mine, spared, theirs = ([r.rows[label] for r in rounds[s] if label in r.rows] for s in SIDES)
        print(f"  {label:34s} {cell(mine, timeout):22s} {cell(spared, timeout):22s} {cell(theirs, timeout)}")
    print("  all ranks stopped: ddpctl, the surviving node's launcher exit (node-exit); hand-written, its step ended")
    print("  the hand-written job has no decision or resume of its own: Slurm acts on the node after SlurmdTimeout")
    ours = [r.rows["all ranks stopped"] for r in rounds["ddpctl"]]
    theirs = [r.rows["all ranks stopped"] for r in rounds["hand-written"]]
    if None in ours or not ours or not theirs:
        print("ratio: not computable (ddpctl recorded no stop)")
        return
    base = statistics.median(v for v in ours if v is not None)
    if None in theirs:
        print(f"ratio hand-written/ddpctl, node death -> all ranks stopped: > {timeout / base:.1f} (did not end)")
    else:
        ratio = statistics.median(v for v in theirs if v is not None) / base
        print(f"ratio hand-written/ddpctl, node death -> all ranks stopped: {ratio:.2f}")


def require_test_cluster() -> None:
    """Only the local test cluster's nodes can be killed and brought back (their slurmd pid files, start.sh)."""
    if os.geteuid() != 0:
        raise SystemExit("bench_node_loss.py must run as root: it SIGKILLs a node's slurmd and restarts it")
    if not (STATE_DIR / "run").is_dir():
        raise SystemExit(
            f"no local test cluster state in {STATE_DIR} (DDPCTL_TEST_STATE_DIR); this benchmark kills nodes of the "
            "cluster that tests/cluster/start.sh runs, nowhere else"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds per side (each costs a few minutes)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds the hand-written job may take to end")
    parser.add_argument("--sleep-per-step", type=float, default=0.5, help="added to every training step")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir and print its path")
    args = parser.parse_args()
    version = use_slurm_version(os.environ)  # that version's clients first on PATH, as the tests do
    require_cluster()
    require_test_cluster()
    print(f"Slurm {version}; SlurmdTimeout {slurmd_timeout()}; load average {load_average()}", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="ddpctl-bench-nodeloss-"))
    jobs = Jobs()
    rounds: dict[str, list[Round]] = {side: [] for side in SIDES}
    try:
        with jobs.guard():
            for number in range(args.rounds):
                for side in SIDES if number % 2 == 0 else SIDES[::-1]:
                    print(f"round {number + 1} {side}:", flush=True)
                    rnd = one_round(side, workdir / f"{side}-{number}", jobs, args)
                    rounds[side].append(rnd)
                    shown = ", ".join(f"{k} {'-' if v is None else f'{v:.1f} s'}" for k, v in rnd.rows.items())
                    print(f"  job {rnd.job_id}, {rnd.victim} killed: {shown}; {'; '.join(rnd.notes)}", flush=True)
    finally:
        if args.keep:
            print(f"scratch dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summarise(rounds, args.timeout)
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
