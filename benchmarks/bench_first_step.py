"""Time to first step on Slurm: `ddpctl submit` vs the hand-written sbatch + srun + torchrun pattern (target ≤ 1.05).

Both sides run the same training script (written to a scratch dir) on a 2-node x 2-process world: Gloo
process group, one tiny training step whose gradients are all-reduced, then each rank appends `time.time()`
to its own file (with the times its process started, finished importing torch and joined the process group:
the phases printed per side). The measured time runs from just before the submit command
(`python -m ddpctl submit SPEC`, resp. `sbatch script`) to the last rank finishing its first step; it
includes submission itself (for ddpctl: interpreter start-up, the run dir and the snapshot),
queueing, start-up of every process on both nodes, the torch import and the rendezvous.

The sides alternate (ddpctl, hand-written, hand-written, ddpctl, ...) so drifting machine load hits both,
after one warm-up job per side that is not counted (`--warmup`): the first job on a freshly started cluster
starts slower, and it would always be ddpctl's.

Both jobs of a round start their submit command at the same fraction of the wall-clock second, and that
fraction steps evenly through [0, 1) over the rounds (`--submit-at paired`, the default). Slurm starts a job at
its next backfill pass, which runs at a fixed point of every second (bf_interval=1; slurmctld's log, tests/
cluster/README.md), so the 0-1 s a job waits to be placed is a function of that fraction alone: submitted at
random moments, each side draws it anew, and 16 such draws move a side's median by more than the 5 % under
test. Paired, both sides of a round get the same draw and the draws cover [0, 1) evenly: the same expectation
as random submission times (`--submit-at random`), with the scheduler's lottery taken out of the difference.
ddpctl's own submit time still counts in full (its sbatch call comes that much later in the second).
Each round waits until the cluster has no jobs at all and no node is still completing one; a round whose job
nevertheless waited behind someone else's job (pending reason Resources/Priority) is discarded and run again.
Jobs are polled with `squeue` every 0.2 s (never `sbatch --wait`) and cancelled on exit, Ctrl-C included.

    python benchmarks/bench_first_step.py [--rounds 5] [--submit-at paired|random] [--keep]

Needs the local test cluster (`bash tests/cluster/start.sh`) or any Slurm cluster with 2 idle nodes in the
default partition whose node names resolve to reachable addresses.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
POLL_S = 0.2
WAITED_REASONS = {"Resources", "Priority", "Dependency", "ReqNodeNotAvail"}  # queued behind another job
TARGET_RATIO = 1.05
DNS_WARNING = "hostname of the client socket cannot be retrieved"
RES_OPTIONS_HELP = (
    "glibc resolver options exported to both sides' jobs (RES_OPTIONS), e.g. 'timeout:1 attempts:1'. torch's c10d "
    "formats every store connection's peer with getnameinfo(); where the nodes' DNS server is routed but never "
    "answers, each such lookup blocks for the resolver timeout (2 x 5 s)."
)

TRAIN_SCRIPT = """\
import time
t_start = time.time()
import os, sys
import torch
import torch.distributed as dist

t_torch = time.time()
out = sys.argv[1]
dist.init_process_group("gloo")
t_pg = time.time()
torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(8, 16)).pow(2).mean()
loss.backward()
for p in model.parameters():
    dist.all_reduce(p.grad)
    p.grad /= dist.get_world_size()
opt.step()
done = time.time()
with open(os.path.join(out, f"rank-{dist.get_rank()}.txt"), "a") as f:
    f.write(f"{t_start!r} {t_torch!r} {t_pg!r} {done!r}\\n")
dist.destroy_process_group()
"""


# --- cluster plumbing (also used by bench_preempt_turnaround.py) -------------------------------------------


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60, **kwargs)  # type: ignore[call-overload, no-any-return]


def require_cluster(nodes: int = 2) -> None:
    """Exit non-zero with a clear message unless a Slurm controller answers with at least `nodes` nodes."""
    try:
        res = run(["sinfo", "-h", "-N", "-o", "%N %T"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(
            f"no Slurm cluster: sinfo failed ({exc}); start one with `bash tests/cluster/start.sh`"
        ) from exc
    usable = {
        line.split()[0]
        for line in res.stdout.splitlines()
        if len(line.split()) == 2 and not line.split()[1].rstrip("*~#").startswith(("down", "drain", "fail"))
    }
    if res.returncode != 0 or len(usable) < nodes:
        detail = (res.stderr or res.stdout).strip() or "no usable nodes"
        raise SystemExit(f"no usable Slurm cluster ({detail}); start one with `bash tests/cluster/start.sh`")


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


class Jobs:
    """The job ids this benchmark submitted; all cancelled on exit (normal, error, Ctrl-C or SIGTERM)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def add(self, job_id: str) -> str:
        self.ids.append(job_id)
        return job_id

    def cancel_all(self) -> None:
        if self.ids:
            run(["scancel", *self.ids])

    @contextlib.contextmanager
    def guard(self) -> Iterator[Jobs]:
        def on_term(signum: int, _frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signum}")

        previous = signal.signal(signal.SIGTERM, on_term)
        try:
            yield self
        except KeyboardInterrupt:
            print("\ninterrupted: cancelling this benchmark's jobs", file=sys.stderr)
            raise SystemExit(130) from None
        finally:
            self.cancel_all()
            signal.signal(signal.SIGTERM, previous)


def queue_state(job_id: str) -> tuple[str, str]:
    """(state, reason) per squeue; ("", "") once squeue no longer lists the job."""
    res = run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"])
    line = res.stdout.strip().splitlines()[0] if res.stdout.strip() else ""
    state, _, reason = line.partition("|")
    return state, reason


def other_jobs(mine: set[str]) -> list[str]:
    res = run(["squeue", "-h", "-o", "%i"])
    return [j for j in res.stdout.split() if j not in mine]


def completing_nodes() -> list[str]:
    """Nodes still completing a job (e.g. the one just cancelled): a job submitted then waits for them, often
    between two 0.2 s polls, so unnoticed and not discarded; the wait would land on whichever side came next."""
    return sorted(set(run(["sinfo", "-h", "-N", "-t", "completing", "-o", "%N"]).stdout.split()))


def wait_cluster_idle(mine: set[str], timeout: float = 600) -> float:
    """Wait until no job but ours is queued or running and no node is still completing; return the seconds
    waited."""
    start = time.monotonic()
    announced = False
    while other_jobs(mine) or completing_nodes():
        if not announced:
            print("  (waiting for other users' jobs to leave the cluster ...)", flush=True)
            announced = True
        if time.monotonic() - start > timeout:
            raise SystemExit(f"the cluster stayed busy for {timeout:.0f} s; try again later")
        time.sleep(1.0)
    return time.monotonic() - start


@dataclass
class Watch:
    """What polling one job saw: when it was first seen RUNNING, when it left squeue, pending reasons."""

    running_at: float | None = None
    gone_at: float | None = None
    reasons: set[str] = field(default_factory=set)
    last_state: str = ""

    def observe(self, job_id: str) -> str:
        """One squeue look at the job: note pending reasons and when it first ran; return its state."""
        state, reason = queue_state(job_id)
        if state == "PENDING" and reason:
            self.reasons.add(reason)
        if state == "RUNNING" and self.running_at is None:
            self.running_at = time.time()
        return state


# States in which a job has left the queue for good ("" = squeue no longer lists it).
GONE_STATES = ("", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def wait_job(job_id: str, timeout: float = 300) -> Watch:
    watch = Watch()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = watch.observe(job_id)
        if state in GONE_STATES:
            watch.gone_at, watch.last_state = time.time(), state or "gone"
            return watch
        watch.last_state = state
        time.sleep(POLL_S)
    raise SystemExit(f"job {job_id} still {watch.last_state} after {timeout:.0f} s")


# --- the two sides ------------------------------------------------------------------------------------------


@dataclass
class Sample:
    side: str
    job_id: str
    submit_s: float  # the submit command's own duration
    running_s: float | None  # first seen RUNNING by the 0.2 s poll
    first_step_s: float  # last rank's first step
    phases: tuple[float, ...]  # PHASES, each the last rank's, seconds after the submit command started
    waited: bool  # queued behind another job: discarded
    dns_stalls: int  # c10d reverse-lookup warnings in the job's logs


def torchrun_path() -> str:
    candidate = Path(sys.executable).with_name("torchrun")
    return str(candidate) if candidate.exists() else "torchrun"


def handwritten_script(workdir: Path, out: Path) -> str:
    # The tutorial pattern: one task per node, torchrun per node, node rank from $SLURM_NODEID (single-quoted,
    # so it expands inside each node's task, not in the batch shell), head node from the allocation.
    inner = (
        f"{shlex.quote(torchrun_path())} --nnodes=2 --nproc-per-node=2 --node-rank=$SLURM_NODEID "
        '--master-addr=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1) --master-port=29500 '
        f"{shlex.quote(str(workdir / 'train.py'))} {shlex.quote(str(out))}"
    )
    return "\n".join(
        [
            "#!/bin/bash",
            "#SBATCH --job-name=handwritten",
            "#SBATCH --nodes=2",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --cpus-per-task=2",
            "#SBATCH --time=00:05:00",
            f"#SBATCH --output={out}/slurm.out",
            "export OMP_NUM_THREADS=1",
            f"srun --ntasks-per-node=1 bash -c {shlex.quote(inner)}",
            "",
        ]
    )


def ddpctl_spec(workdir: Path, out: Path, extra: dict[str, str]) -> str:
    import json

    fields: dict[str, object] = {
        "name": "firststep",
        "script": str(workdir / "train.py"),
        "args": [str(out)],
        "nodes": 2,
        "nproc_per_node": 2,
        "cpus_per_task": 2,
        "time": "00:05:00",
        "run_dir": str(workdir / "runs"),
        "env": {"OMP_NUM_THREADS": "1"},
    }
    fields.update(extra)
    return json.dumps(fields)  # JSON is YAML


PHASES = ("worker process started", "torch imported", "process group ready", "first step done")


def rank_stamps(out: Path, ranks: int) -> list[tuple[float, ...]]:
    """Per rank that finished its first step: (process start, torch imported, process group ready, step done)."""
    stamps = []
    for rank in range(ranks):
        text = (out / f"rank-{rank}.txt").read_text() if (out / f"rank-{rank}.txt").exists() else ""
        if text.strip() and text.endswith("\n"):
            stamps.append(tuple(float(x) for x in text.split()[:4]))
    return stamps


def wait_first_steps(
    job_id: str, out: Path, ranks: int = 4, timeout: float = 300
) -> tuple[Watch, list[tuple[float, ...]]]:
    """Poll squeue and the rank files every 0.2 s until every rank has stamped its first step."""
    watch = Watch()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = watch.observe(job_id)
        stamps = rank_stamps(out, ranks)
        if len(stamps) == ranks:
            return watch, stamps
        if state in GONE_STATES:
            time.sleep(2)  # the last stamps may still be on their way through the shared filesystem
            stamps = rank_stamps(out, ranks)
            if len(stamps) == ranks:
                return watch, stamps
            raise SystemExit(
                f"job {job_id} ended ({state or 'gone'}) with {len(stamps)}/{ranks} ranks past their "
                f"first step; logs under {out.parent.parent}"
            )
        watch.last_state = state
        time.sleep(POLL_S)
    raise SystemExit(f"job {job_id}: not every rank finished a step after {timeout:.0f} s (state {watch.last_state})")


def cancel_and_wait(job_id: str, timeout: float = 120) -> None:
    """Cancel the job (only its first step matters) and wait until squeue no longer lists it."""
    run(["scancel", job_id])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and queue_state(job_id)[0] not in ("", "CANCELLED", "COMPLETED", "FAILED"):
        time.sleep(POLL_S)


def job_env(res_options: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    if res_options:
        env["RES_OPTIONS"] = res_options  # glibc resolver options; exported by sbatch to every process of the job
    return env


def count_dns_stalls(paths: list[Path]) -> int:
    """c10d's warning for a reverse lookup that failed (each one cost the resolver's full timeout)."""
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += path.read_text(errors="replace").count(DNS_WARNING)
    return total


def wait_for_fraction(fraction: float | None) -> None:
    """Sleep until the wall clock's fraction of a second is `fraction` (None: start at once)."""
    if fraction is not None:
        time.sleep((fraction - time.time()) % 1.0)


def round_fraction(mode: str, rnd: int, rounds: int) -> float | None:
    """The fraction of a second at which round `rnd`'s jobs are submitted: evenly spread (paired), or None."""
    return (rnd + 0.5) / rounds if mode == "paired" else None


def run_side(
    side: str,
    workdir: Path,
    index: int,
    jobs: Jobs,
    *,
    res_options: str,
    extra: dict[str, str],
    fraction: float | None = None,
) -> Sample:
    out = workdir / "out" / f"{side}-{index}"
    out.mkdir(parents=True)
    env = job_env(res_options, DDPCTL_HOME=str(workdir / "home"))
    if side == "ddpctl":
        spec = workdir / f"spec-{index}.yaml"
        spec.write_text(ddpctl_spec(workdir, out, extra))
        argv = [sys.executable, "-m", "ddpctl", "submit", str(spec)]
    else:
        script = workdir / f"handwritten-{index}.sbatch"
        script.write_text(handwritten_script(workdir, out))
        argv = ["sbatch", "--parsable", str(script)]
    wait_for_fraction(fraction)
    t0 = time.time()
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, check=False, timeout=120)
    submit_s = time.time() - t0
    if done.returncode != 0:
        raise SystemExit(f"{side}: {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    job_id = done.stdout.split("job ", 1)[1].split()[0] if side == "ddpctl" else done.stdout.strip().split(";")[0]
    jobs.add(job_id)
    watch, stamps = wait_first_steps(job_id, out)
    cancel_and_wait(job_id)  # the teardown is not measured: free the nodes for the next round
    running = None if watch.running_at is None else watch.running_at - t0
    logs = [out / "slurm.out", *(workdir / "runs" / "firststep" / job_id).rglob("*.log")]
    phases = tuple(max(st[i] for st in stamps) - t0 for i in range(len(PHASES)))
    return Sample(
        side,
        job_id,
        submit_s,
        running,
        phases[-1],
        phases,
        bool(watch.reasons & WAITED_REASONS),
        count_dns_stalls(logs),
    )


def warm_up(workdir: Path, jobs: Jobs, count: int, *, res_options: str, extra: dict[str, str]) -> int:
    """`count` jobs per side, printed and not counted; returns how many jobs ran."""
    index = 0
    for _ in range(count):
        for side in ("ddpctl", "handwritten"):
            wait_cluster_idle(set(jobs.ids))
            index += 1
            sample = run_side(side, workdir, index, jobs, res_options=res_options, extra=extra)
            print(f"warm-up {side:11s} job {sample.job_id:>5}: first step {sample.first_step_s:.2f} s, not counted")
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--retries", type=int, default=5, help="extra runs allowed for rounds that queued behind other users' jobs"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="jobs per side run first and not counted: the first job on a freshly started cluster starts "
        "slower (cold caches, first cgroups), and it would always be ddpctl's",
    )
    parser.add_argument(
        "--submit-at",
        choices=("paired", "random"),
        default="paired",
        help="paired: both jobs of a round are submitted at the same fraction of a second, spread evenly over "
        "the rounds (the scheduler's 0-1 s placement delay is then the same for both); random: at once",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir and print its path")
    parser.add_argument("--res-options", default="", help=RES_OPTIONS_HELP)
    parser.add_argument(
        "--ddpctl-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="extra spec field for the ddpctl side, e.g. rdzv=static (repeatable)",
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.ddpctl_set)
    require_cluster()
    if extra:
        print(f"ddpctl spec overrides: {extra}")
    if args.res_options:
        print(f"both sides' jobs run with RES_OPTIONS={args.res_options!r}")
    jobs = Jobs()
    scratch = tempfile.mkdtemp(prefix="ddpctl-bench-first-step-")
    workdir = Path(scratch)
    (workdir / "train.py").write_text(TRAIN_SCRIPT)
    loads: list[str] = [load_average()]
    samples: dict[str, list[Sample]] = {"ddpctl": [], "handwritten": []}
    retries = args.retries
    try:
        with jobs.guard():
            order = ["ddpctl", "handwritten"]
            index = warm_up(workdir, jobs, args.warmup, res_options=args.res_options, extra=extra)
            for rnd in range(args.rounds):
                for side in order if rnd % 2 == 0 else reversed(order):
                    while True:
                        wait_cluster_idle(set(jobs.ids))
                        index += 1
                        fraction = round_fraction(args.submit_at, rnd, args.rounds)
                        sample = run_side(
                            side, workdir, index, jobs, res_options=args.res_options, extra=extra, fraction=fraction
                        )
                        loads.append(load_average())
                        running = "?" if sample.running_s is None else f"{sample.running_s:.2f}"
                        print(
                            f"round {rnd + 1} {side:11s} job {sample.job_id:>5}: "
                            f"{'' if fraction is None else f'submitted at second+{fraction:.2f}, '}"
                            f"submit cmd {sample.submit_s:.2f} s, "
                            f"RUNNING seen {running} s, first step (all ranks) {sample.first_step_s:.2f} s, "
                            f"c10d DNS stalls {sample.dns_stalls}"
                            f"{'  [queued behind another job: discarded]' if sample.waited else ''}"
                            f"  load {loads[-1]}",
                            flush=True,
                        )
                        if not sample.waited:
                            samples[side].append(sample)
                            break
                        retries -= 1
                        if retries < 0:
                            raise SystemExit("too many rounds disturbed by other users' jobs; try again later")
    finally:
        if args.keep:
            print(f"scratch dir kept: {workdir}")
        else:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    summarise(samples, loads)


def summarise(samples: dict[str, list[Sample]], loads: list[str]) -> None:
    print()
    med = {side: statistics.median(s.first_step_s for s in got) for side, got in samples.items()}
    for side, got in samples.items():
        subm = statistics.median(s.submit_s for s in got)
        runs = [s.running_s for s in got if s.running_s is not None]
        run_med = f"{statistics.median(runs):.2f} s" if runs else "?"
        print(
            f"{side:11s}: first step median {med[side]:.2f} s over {len(got)} runs "
            f"(min {min(s.first_step_s for s in got):.2f}, max {max(s.first_step_s for s in got):.2f}); "
            f"submit command {subm:.2f} s, RUNNING seen {run_med}, "
            f"c10d DNS stalls {sum(s.dns_stalls for s in got)} in all"
        )
    print("phases (median over runs of the last rank's time, seconds after the submit command started):")
    print(f"  {'':24s} {'ddpctl':>8s} {'hand-written':>13s}")
    for i, phase in enumerate(PHASES):
        ours, theirs = (statistics.median(s.phases[i] for s in samples[side]) for side in ("ddpctl", "handwritten"))
        print(f"  {phase:24s} {ours:8.2f} {theirs:13.2f}")
    ratio = med["ddpctl"] / med["handwritten"]
    print(
        f"ratio ddpctl/hand-written = {ratio:.3f} (target <= {TARGET_RATIO:.2f}): "
        f"{'met' if ratio <= TARGET_RATIO else 'MISSED'}"
    )
    print(f"load average (1/5/15 min) before: {loads[0]}; after each job: {', '.join(x.split()[0] for x in loads[1:])}")


if __name__ == "__main__":
    main()
