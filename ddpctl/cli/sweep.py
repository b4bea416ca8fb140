"""`ddpctl sweep SPEC --grid KEY=V1,V2 [--zip ...] [--max-parallel N] [--name NAME] [--set ...] --dry-run`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ddpctl.cli.common import RESULTS, add_cluster_arg, add_spec_args
from ddpctl.errors import ArgumentError, SpecError
from ddpctl.spec.capabilities import ARRAY, QUEUE

if TYPE_CHECKING:
    from ddpctl.api.sweeps import Sweep as ApiSweep
    from ddpctl.spec.sweepload import Sweep


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "sweep",
        help="run a sweep: the spec over a grid of values, as one job array (local: a queue on this machine)",
        description="Expand the spec over --grid/--zip values (and the spec file's sweep: block), check every "
        "point as a --set would be checked, and submit them as one Slurm job array (sbatch backend; returns at "
        "once, nothing of ddpctl stays running). Each task is a full multi-node run in "
        "<run_dir>/<name>/<array job>_<task>/ and requeues only itself. `ddpctl list` shows the sweep as one "
        "line (--tasks: and its tasks), `ddpctl status NAME` its tasks; status/logs/top/cancel/preempt take a "
        "task id (123_4) or NAME_TASK (NAME_4), `cancel NAME` ends every task. On the local backend "
        "(--set backend=local) one detached queue process starts the tasks on this machine, --max-parallel at a "
        "time (default 1; at most 100 points), as "
        "<run_dir>/<name>/local-N_<task>/; the submitit backend does not run sweeps yet. "
        "`ddpctl sweep results NAME` ranks tasks by their heartbeat values. --cluster NAME (or the spec's "
        "cluster:) sends the code and runs the sweep on that remote cluster; its tasks are recorded here, so the "
        "commands above find them there.",
    )
    add_spec_args(parser, first_words=("results",))
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="sweep a spec key over values, crossed with every other key (repeatable)",
    )
    parser.add_argument(
        "--zip",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="values taken together with the other --zip keys' (same count), crossed with the grid (repeatable)",
    )
    parser.add_argument(
        "--max-parallel",
        type=int,
        metavar="N",
        help="at most N tasks at once (sbatch `--array=0-(n-1)%%N`; default: no limit; local backend: default 1)",
    )
    parser.add_argument("--name", help="the sweep's name: the spec's name for every point (default: the spec's)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the points and the array's batch script; submit nothing"
    )
    add_cluster_arg(
        parser, "run the sweep on this remote cluster (clusters.yaml): the code sent, its ddpctl submits it there"
    )
    parser.add_argument("--tag", help=argparse.SUPPRESS)  # --cluster: learn a dropped submission's outcome
    parser.set_defaults(func=run)
    add_results(sub)


def run(args: argparse.Namespace) -> int:
    # The spec and plan layers only, as `render`: a dry run needs no backend, registry or logs machinery.
    from ddpctl.plan.sweep import plan_sweep
    from ddpctl.spec.sweepload import load_sweep

    sweep = load_sweep(
        args.spec,
        args.overrides,
        grid=args.grid,
        zipped=args.zip,
        max_parallel=args.max_parallel,
        name=args.name,
    )
    if args.cluster or sweep.spec.cluster is not None:  # rendered and run by the cluster's ddpctl, not here
        from ddpctl.cli.remote_sweep import run_remote

        return run_remote(args, sweep)
    if args.tag is not None:
        raise ArgumentError(f"--tag {args.tag!r}: only with --cluster (it names a dropped remote sweep's outcome)")
    check_backend(sweep)  # the dry run refuses what the sweep refuses: its plan would be a job array's
    if not args.dry_run:
        return submit(sweep)
    plan = plan_sweep(sweep)
    sys.stdout.write(plan.text())
    return 0


def submit(loaded: Sweep) -> int:
    announce(loaded, submitted(loaded))
    return 0


def submitted(loaded: Sweep) -> ApiSweep:
    """The sweep submitted (here, or by a cluster's ddpctl for `sweep --cluster`), or the backend's one line."""
    from ddpctl.api.sweeps import submit_loaded

    check_backend(loaded)
    return submit_loaded(loaded)


def check_backend(loaded: Sweep) -> None:
    if loaded.spec.capabilities.sweeps not in (ARRAY, QUEUE):
        raise SpecError(
            f"{loaded.spec.source}: backend {loaded.spec.backend}: sweeps are submitted on the sbatch and local "
            "backends only yet; expected backend: sbatch or local"
        )


def announce(loaded: Sweep, done: ApiSweep) -> None:
    for line in announcement(loaded, done):
        print(line)


def announcement(loaded: Sweep, done: ApiSweep) -> list[str]:
    """What `ddpctl sweep` says of a submitted sweep (a remote sweep's cluster side returns the same lines)."""
    from ddpctl.spec.sweep import array_range

    if loaded.spec.capabilities.sweeps == QUEUE:
        at_once = loaded.axes.max_parallel or 1
        head = (
            f"submitted sweep {done.name}: {done.array_job} on this machine, {points(len(done.jobs))}, "
            f"{at_once} at a time (a detached queue starts them; nothing stays in this terminal)"
        )
    else:
        array = array_range(len(done.jobs), loaded.axes.max_parallel)
        head = f"submitted sweep {done.name}: job array {done.array_job}, {points(len(done.jobs))} (--array={array})"
    return [
        head,
        f"run dirs: {done.run_base}/{done.array_job}_<point>/",
        f"status:   ddpctl status {done.array_job}   (a task: ddpctl status {done.array_job}_0)",
        f"cancel:   ddpctl cancel {done.array_job}",
    ]


def points(count: int) -> str:
    return "1 point" if count == 1 else f"{count} points"


def add_results(sub: Any) -> None:
    """`ddpctl sweep results` (main() routes those two words here): no help line of its own, sweep's names it."""
    parser = sub.add_parser(
        RESULTS,
        prog="ddpctl sweep results",
        description="Each task's job state and its final and best heartbeat values (beat.step(..., loss=...)) "
        "from its run dir, the best first and marked *; partial while tasks run. Best: of the values the heartbeat "
        "wrote (at most one a second). A directory named wins over a sweep of the same name.",
    )
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="SWEEP|DIR",
        help="a sweep's name or array job id (from the registry), a task's run dir, or a directory of them "
        "(<run_dir>/<name>/)",
    )
    parser.add_argument("--metric", default="loss", help="the named value to rank by (default: loss)")
    parser.add_argument(
        "--mode", choices=("min", "max"), default="min", help="lower or higher is better (default: min)"
    )
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="one JSON object per task")
    shape.add_argument("--csv", action="store_true", help="CSV with a header line")
    add_cluster_arg(parser, "the sweep of this remote cluster (clusters.yaml): its ddpctl ranks it")
    parser.set_defaults(func=results)


def results(args: argparse.Namespace) -> int:
    from ddpctl.cli.common import remote_text

    if args.cluster or remote_sweeps(args):  # read by the cluster's ddpctl: the run dirs are there
        return remote_text(args.cluster, remote_words(args))
    return results_here(args)


def remote_words(args: argparse.Namespace) -> list[str]:
    from ddpctl.remote.passthrough import option

    shape = ["--json"] if args.json else ["--csv"] if args.csv else []
    return ["sweep", "results", option("--metric", args.metric), option("--mode", args.mode), *shape, "--", *args.runs]


def remote_sweeps(args: argparse.Namespace) -> bool:
    """Whether every SWEEP named is no directory here and no sweep of the local registry but a sweep submitted
    from here to one remote cluster: then `args` name them there (that cluster, their array job ids)."""
    import os

    from ddpctl.remote.jobs import find_recorded, recorded
    from ddpctl.run.registry import Registry
    from ddpctl.run.sweeps import sweep_tasks

    local = Registry.from_env().records()
    if any(os.path.lexists(ref) or sweep_tasks(local, ref) for ref in args.runs):
        return False
    remote = recorded()
    found = [row for ref in args.runs if (row := find_recorded(ref, remote)) is not None and row.record.sweep]
    if len(found) != len(args.runs):
        return False
    if len({row.cluster for row in found}) != 1:
        raise ArgumentError("sweep results: the sweeps named are on different clusters; name one cluster's at a time")
    args.cluster, args.runs = found[0].cluster, [row.job_ref for row in found]
    return True


def results_here(args: argparse.Namespace) -> int:
    from ddpctl.api.sweeps import result_dirs, result_points, result_states
    from ddpctl.cli.sweep_output import print_results
    from ddpctl.health.results import rank, read_task
    from ddpctl.run.registry import Registry

    records = Registry.from_env().records()
    run_dirs = result_dirs(args.runs, records)
    states = result_states(records, run_dirs)
    ranked = rank([read_task(run_dir) for run_dir in run_dirs], args.metric, args.mode)
    shape = "json" if args.json else "csv" if args.csv else "table"
    print_results(ranked, args.metric, args.mode, shape, states=states, points=result_points(records, run_dirs))
    return 0
