"""Preemption turnaround on Slurm: ddpctl's example job vs a submitit `Checkpointable` doing the same training.

A victim job (2 nodes x 2 ranks, partition `debug`) trains; once it has done a few steps an urgent job
(`sbatch -p urgent -N2 --exclusive --wrap 'sleep 1'`, see --urgent-sleep) preempts it. Measured from the urgent job's
submission to the victim's first training step after its requeue (rank 0's step log line, polled every
0.1 s on both sides), and the steps recomputed (steps the resumed attempt computes that the interrupted one
had already computed).

- ddpctl: `ddpctl submit jobs/example.yaml` (args: 1 epoch of 40 steps, --sleep-per-step, no periodic
  checkpoint): the batch shell gets USR2, fans it out, the ranks agree on a step, save, exit; the batch shell
  decides and runs `scontrol requeue`.
- submitit: benchmarks/submitit_baseline.py, the same model, data and per-step work: USR2 reaches every task,
  rank 0 saves in `checkpoint()` from the signal handler and runs `scontrol requeue`.

Targets: ddpctl recomputes 0 steps; turnaround <= the cluster's requeue hold (cred_expire + 1 s) + 5 s.
A timeline per side says where the time goes (signal, stop, checkpoint, requeue, hold, start, torch import,
rendezvous, first step). Sides alternate; each round waits for a cluster without other users' jobs.

    python benchmarks/bench_preempt_turnaround.py [--rounds 3] [--sleep-per-step 0.2] [--res-options ...] [--chain]
        [--requeue]

The ddpctl side submits with `requeue.mode: auto` (what a user gets: requeue at this cluster's 6 s hold, chain
from a 30 s hold on, as at Slurm's default `cred_expire=120`; each round prints what it picked). `--chain` and
`--requeue` add ddpctl with that mode forced: compare them at a real site's hold with the cluster started as
`DDPCTL_TEST_CRED_EXPIRE=120 bash tests/cluster/start.sh`.

Needs the local test cluster (`bash tests/cluster/start.sh`: partitions debug and urgent, preemption by
partition priority with preempt_send_user_signal).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_first_step import (
    RES_OPTIONS_HELP,
    Jobs,
    cancel_and_wait,
    count_dns_stalls,
    job_env,
    load_average,
    queue_state,
    require_cluster,
    run,
    wait_cluster_idle,
)

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
POLL_S = 0.1
STEPS, SAMPLES = 40, 10240  # one epoch of 40 optimizer steps on 4 ranks, on both sides
WARM_STEPS = 3  # preempt once the victim has done this many steps
EXAMPLE_STEP = re.compile(r"^\[example\] step (\d+)/", re.M)
EXAMPLE_RESUMED = re.compile(r"resumed from step (\d+)")
BASE_STEP = re.compile(r"^step (\d+)/\d+ .* t=([\d.]+)$", re.M)
BASE_MARK = re.compile(
    r"^(import|torch|dist|resumed step \d+|checkpoint-start step \d+|checkpoint-end step \d+) "
    r"t=([\d.]+)$",
    re.M,
)


def read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def cred_expire_s() -> int | None:
    res = run(["scontrol", "show", "config"])
    found = re.search(r"cred_expire=(\d+)", res.stdout)
    return int(found.group(1)) if found else None


@dataclass
class Round:
    side: str
    job_id: str
    urgent_id: str
    t0: float  # urgent submission
    first_step: float | None = None  # polled: first step line of the resumed attempt (rank 0)
    recomputed: int | None = None
    marks: dict[str, float] = field(default_factory=dict)  # label -> seconds after t0
    dns_stalls: int = 0
    disturbed_by: list[str] = field(default_factory=list)  # other users' jobs that ran meanwhile: discarded

    @property
    def turnaround(self) -> float:
        assert self.first_step is not None
        return self.first_step - self.t0


class Side:
    name = ""

    def __init__(self, workdir: Path, index: int, sleep_per_step: float, res_options: str) -> None:
        self.workdir, self.index, self.sleep, self.res_options = workdir, index, sleep_per_step, res_options
        self.job_id = ""

    def submit(self) -> str:
        raise NotImplementedError

    def steps_done(self, attempt: int) -> int:
        raise NotImplementedError

    def first_resumed_step_seen(self) -> bool:
        raise NotImplementedError

    def analyse(self, rnd: Round) -> None:
        raise NotImplementedError

    def successors(self) -> list[str]:
        """Jobs the victim's run goes on in (requeue.mode chain): its own, not another user's."""
        return []


class DdpctlSide(Side):
    name = "ddpctl"
    mode = "auto"  # requeue.mode

    def submit(self) -> str:
        home, runs = self.workdir / f"home-{self.index}", self.workdir / f"runs-{self.index}"
        args = ["--epochs", "1", "--samples", str(SAMPLES), "--ckpt-every", "0", "--sleep-per-step", str(self.sleep)]
        argv = [
            sys.executable,
            "-m",
            "ddpctl",
            "submit",
            str(ROOT / "jobs" / "example.yaml"),
            "--set",
            f"run_dir={runs}",
            "--set",
            f"args={json.dumps(args)}",
            "--set",
            f"requeue.mode={self.mode}",
        ]
        done = subprocess.run(
            argv,
            cwd=ROOT,
            env=job_env(self.res_options, DDPCTL_HOME=str(home)),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise SystemExit(f"ddpctl submit failed ({done.returncode}): {done.stderr.strip()}")
        self.job_id = done.stdout.split("job ", 1)[1].split()[0]
        self.run_dir = Path(done.stdout.split("run dir:", 1)[1].split()[0])
        picked = next((line.strip() for line in done.stdout.splitlines() if line.startswith("requeue:")), "")
        print(f"  {self.name}: {picked or 'requeue: (not said)'}", flush=True)
        return self.job_id

    def rank0(self, attempt: int) -> str:
        return read(self.run_dir / f"attempt-{attempt}" / "rank-0.log")

    def steps_done(self, attempt: int) -> int:
        return max((int(s) for s in EXAMPLE_STEP.findall(self.rank0(attempt))), default=0)

    def first_resumed_step_seen(self) -> bool:
        return EXAMPLE_STEP.search(self.rank0(1)) is not None

    def analyse(self, rnd: Round) -> None:
        events = [json.loads(line) for line in read(self.run_dir / "events.jsonl").splitlines() if line.strip()]

        def at(event: str, attempt: int, pick: str = "min") -> None:
            times = [e["t"] for e in events if e.get("event") == event and e.get("attempt") == attempt]
            if times:
                rnd.marks[f"{event} (attempt {attempt})"] = (min if pick == "min" else max)(times) - rnd.t0

        at("signal", 0)
        at("stop-signal", 0)
        stop = next((e for e in events if e.get("event") == "stop" and e.get("attempt") == 0), None)
        if stop is not None:
            if stop.get("signal_time"):
                rnd.marks["first rank saw the stop request"] = stop["signal_time"] - rnd.t0
            rnd.marks["stop checkpoint saved (stop event)"] = stop["t"] - rnd.t0
        at("node-exit", 0, "max")
        at("decision", 0)
        at("attempt-start", 1)
        at("launch", 1, "max")
        stopped = max((int(s) for s in EXAMPLE_STEP.findall(self.rank0(0))), default=0)
        resumed = EXAMPLE_RESUMED.search(self.rank0(1))
        rnd.recomputed = max(0, stopped - (int(resumed.group(1)) if resumed else 0))
        rnd.dns_stalls = count_dns_stalls([*self.run_dir.rglob("*.log"), self.run_dir / "slurm.out"])

    def successors(self) -> list[str]:
        """The successor jobs of a chained run (`auto` chains where the requeue hold is long)."""
        found = []
        for line in read(self.run_dir / "events.jsonl").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line still being written
            if isinstance(event, dict) and event.get("event") == "chain-submit" and event.get("job_id"):
                found.append(str(event["job_id"]))
        return found


class DdpctlChainSide(DdpctlSide):
    """requeue.mode chain: the run goes on in a successor job submitted at the signal, a new job that Slurm's
    requeue hold (cred_expire + 1 s) does not apply to."""

    name = "ddpctl-chain"
    mode = "chain"


class DdpctlRequeueSide(DdpctlSide):
    """requeue.mode requeue: the same job requeues itself and waits out Slurm's hold."""

    name = "ddpctl-requeue"
    mode = "requeue"


class SubmititSide(Side):
    name = "submitit"

    def submit(self) -> str:
        self.base = self.workdir / f"submitit-{self.index}"
        argv = [
            sys.executable,
            str(HERE / "submitit_baseline.py"),
            str(self.base),
            "--steps",
            str(STEPS),
            "--samples",
            str(SAMPLES),
            "--sleep-per-step",
            str(self.sleep),
        ]
        done = subprocess.run(
            argv, cwd=ROOT, env=job_env(self.res_options), capture_output=True, text=True, check=False, timeout=120
        )
        if done.returncode != 0:
            raise SystemExit(f"submitit baseline submission failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        self.job_id = done.stdout.strip().splitlines()[-1]
        return self.job_id

    def progress(self, attempt: int, rank: int) -> str:
        return read(self.base / "progress" / f"attempt-{attempt}" / f"rank-{rank}.log")

    def steps_done(self, attempt: int) -> int:
        return max((int(s) for r in range(4) for s, _ in BASE_STEP.findall(self.progress(attempt, r))), default=0)

    def first_resumed_step_seen(self) -> bool:
        return BASE_STEP.search(self.progress(1, 0)) is not None

    def analyse(self, rnd: Round) -> None:
        for attempt in (0, 1):
            for rank in range(4):
                for raw, stamp in BASE_MARK.findall(self.progress(attempt, rank)):
                    label = raw.split(" step")[0]
                    value = float(stamp) - rnd.t0
                    if rank == 0:
                        rnd.marks[f"{label} (attempt {attempt}, rank 0)"] = value
                    if attempt == 1 and label in ("import", "torch", "dist"):
                        key = f"{label} (attempt 1, last rank)"
                        rnd.marks[key] = max(rnd.marks.get(key, value), value)
        steps = BASE_STEP.findall(self.progress(1, 0))
        if steps:
            rnd.marks["first resumed step (attempt 1, rank 0, own clock)"] = float(steps[0][1]) - rnd.t0
        resumed = re.search(r"^resumed step (\d+)", self.progress(1, 0), re.M)
        rnd.recomputed = max(0, self.steps_done(0) - (int(resumed.group(1)) if resumed else 0))
        folder = self.base / "submitit"
        rnd.dns_stalls = count_dns_stalls([*folder.rglob("*.out"), *folder.rglob("*.err")])


def all_jobs() -> dict[str, tuple[str, str]]:
    """Every job squeue lists: id -> (state, reason)."""
    res = run(["squeue", "-h", "-o", "%i|%T|%r"])
    found = {}
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            found[parts[0]] = (parts[1], parts[2])
    return found


def wait_until(predicate: object, timeout: float, what: str, job_id: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        state, _ = queue_state(job_id)
        if state in ("", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            raise SystemExit(f"job {job_id} ended ({state or 'gone'}) while waiting for {what}")
        time.sleep(0.2)
    raise SystemExit(f"job {job_id}: timed out after {timeout:.0f} s waiting for {what}")


def one_round(side: Side, jobs: Jobs, workdir: Path, urgent_sleep: float) -> Round:
    jobs.add(side.submit())
    wait_until(lambda: side.steps_done(0) >= WARM_STEPS, 300, f"{WARM_STEPS} training steps", side.job_id)
    t0 = time.time()
    done = run(
        [
            "sbatch",
            "-p",
            "urgent",
            "-N2",
            "--exclusive",  # whole nodes: under select/cons_tres a 1-CPU job could fit beside the victim
            "--parsable",
            "--job-name=urgent",
            f"--output={workdir}/urgent-%j.out",
            "--wrap",
            f"sleep {urgent_sleep:g}",
        ]
    )
    if done.returncode != 0:
        raise SystemExit(f"sbatch of the urgent job failed: {done.stderr.strip()}")
    rnd = Round(side.name, side.job_id, jobs.add(done.stdout.strip().split(";")[0]), t0)
    states: dict[str, str] = {}
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        now = time.time()
        if side.first_resumed_step_seen():
            rnd.first_step = now
            break
        queue = all_jobs()
        for label, job in (("victim", rnd.job_id), ("urgent", rnd.urgent_id)):
            state, reason = queue.get(job, ("", ""))
            key = f"{state}|{reason}" if state == "PENDING" else state
            if states.get(label) != key:
                states[label] = key
                mark = f"{label} {state or 'gone'}" + (f" ({reason})" if state == "PENDING" and reason else "")
                rnd.marks.setdefault(mark, now - t0)
        mine = (rnd.job_id, rnd.urgent_id, *side.successors())
        others = sorted(j for j, (state, _) in queue.items() if state == "RUNNING" and j not in mine)
        if others and not rnd.disturbed_by:
            rnd.disturbed_by = others
        time.sleep(POLL_S)
    else:
        raise SystemExit(f"{side.name} job {side.job_id}: no resumed training step within 240 s of the preemption")
    side.analyse(rnd)
    cancel_and_wait(side.job_id)
    for successor in side.successors():
        cancel_and_wait(successor)
    cancel_and_wait(rnd.urgent_id)
    return rnd


def print_round(rnd: Round) -> None:
    note = f"  [other users' jobs {', '.join(rnd.disturbed_by)} ran meanwhile: discarded]" if rnd.disturbed_by else ""
    print(
        f"  {rnd.side} job {rnd.job_id}: turnaround {rnd.turnaround:.2f} s, steps recomputed {rnd.recomputed}, "
        f"c10d DNS stalls {rnd.dns_stalls}  (load {load_average()}){note}",
        flush=True,
    )
    for label, t in sorted(rnd.marks.items(), key=lambda kv: kv[1]):
        print(f"      {t:7.2f}  {label}")
    print(f"      {rnd.turnaround:7.2f}  first resumed step seen (poll)", flush=True)


def summarise(rounds: dict[str, list[Round]], hold: int | None) -> None:
    print()
    target = None if hold is None else hold + 5
    med = {}
    for side, got in rounds.items():
        med[side] = statistics.median(r.turnaround for r in got)
        rec = [r.recomputed for r in got]
        print(
            f"{side:9s}: turnaround median {med[side]:.2f} s over {len(got)} rounds "
            f"(min {min(r.turnaround for r in got):.2f}, max {max(r.turnaround for r in got):.2f}); "
            f"steps recomputed {rec}"
        )
        labels = {label for r in got for label in r.marks}
        common = sorted((statistics.median(r.marks[lb] for r in got if lb in r.marks), lb) for lb in labels)
        for t, label in common:
            print(f"      {t:7.2f}  {label}  (median)")
    for side in (s for s in ("ddpctl", "ddpctl-chain", "ddpctl-requeue") if s in med):
        target_note = " (target <= 0.75 at cred_expire 120)" if side == "ddpctl" else ""
        print(f"ratio {side}/submitit = {med[side] / med['submitit']:.3f}{target_note}")
    if target is not None:
        verdict = "met" if med["ddpctl"] <= target else "MISSED"
        print(
            f"target: ddpctl turnaround <= requeue hold {hold} s + 5 s = {target} s: {verdict}; "
            f"0 steps recomputed: {'met' if all(r.recomputed == 0 for r in rounds['ddpctl']) else 'MISSED'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sleep-per-step", type=float, default=0.2, help="added to every step on both sides")
    parser.add_argument("--res-options", default="", help=RES_OPTIONS_HELP)
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir and print its path")
    parser.add_argument(
        "--urgent-sleep",
        type=float,
        default=1.0,
        help="how long the urgent job runs; at >= the requeue hold the nodes stay busy until the "
        "victim may start again, so another user's pending job cannot slip in during the hold",
    )
    parser.add_argument(
        "--chain", action="store_true", help="another side: ddpctl with requeue.mode chain (a successor job)"
    )
    parser.add_argument(
        "--requeue", action="store_true", help="another side: ddpctl with requeue.mode requeue (the same job)"
    )
    parser.add_argument(
        "--retries", type=int, default=4, help="extra rounds allowed for rounds disturbed by other users' jobs"
    )
    args = parser.parse_args()
    require_cluster()
    partitions = run(["sinfo", "-h", "-o", "%P"]).stdout.split()
    if "urgent" not in partitions:
        raise SystemExit(
            f"no 'urgent' partition (found {partitions}); start the test cluster with `bash tests/cluster/start.sh`"
        )
    cred = cred_expire_s()
    hold = None if cred is None else cred + 1
    print(
        f"requeue hold (cred_expire + 1): {hold} s; urgent job: sleep {args.urgent_sleep:g}; "
        f"load average {load_average()}"
        + (f"; jobs run with RES_OPTIONS={args.res_options!r}" if args.res_options else ""),
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="ddpctl-bench-preempt-"))
    jobs = Jobs()
    extra = [*([DdpctlChainSide] if args.chain else []), *([DdpctlRequeueSide] if args.requeue else [])]
    kinds: list[type[Side]] = [DdpctlSide, *extra, SubmititSide]
    rounds: dict[str, list[Round]] = {kind.name: [] for kind in kinds}
    try:
        with jobs.guard():
            index, retries = 0, args.retries
            for number in range(args.rounds):
                for kind in kinds if number % 2 == 0 else reversed(kinds):
                    while True:
                        wait_cluster_idle(set(jobs.ids))
                        index += 1
                        side = kind(workdir, index, args.sleep_per_step, args.res_options)
                        print(f"round {number + 1} {side.name}:", flush=True)
                        rnd = one_round(side, jobs, workdir, args.urgent_sleep)
                        print_round(rnd)
                        if not rnd.disturbed_by:
                            rounds[side.name].append(rnd)
                            break
                        retries -= 1
                        if retries < 0:
                            raise SystemExit("too many rounds disturbed by other users' jobs; try again later")
    finally:
        if args.keep:
            print(f"scratch dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    summarise(rounds, hold)
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
