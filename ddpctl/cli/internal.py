"""`ddpctl internal ...`: called by the rendered batch script (and the local backend), not by people."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def add(sub: Any) -> None:
    # No `help=`: argparse then leaves it out of the top-level command list; it stays callable.
    parser = sub.add_parser(
        "internal", description="Used by batch scripts and the local supervisor: batch-start, on-signal, decide, ..."
    )
    inner = parser.add_subparsers(dest="internal_command", required=True, metavar="STEP")
    start = inner.add_parser("batch-start", help="record the start of a run of the job")
    start.add_argument("run_dir", type=Path)
    start.add_argument("--at", default="", help="when the batch shell started the run (seconds since the epoch)")
    start.set_defaults(func=run_batch_start)
    sig = inner.add_parser("on-signal", help="the warning/preemption signal arrived: fan it out to all nodes")
    sig.add_argument("run_dir", type=Path)
    sig.add_argument("--signal", default="USR2")
    sig.add_argument("--before-step", action="store_true", help="no step yet: the stop files alone carry it")
    sig.set_defaults(func=run_on_signal)
    dec = inner.add_parser("decide", help="the step ended: print requeue|finish, exit with the job's status")
    dec.add_argument("run_dir", type=Path)
    dec.add_argument("--exit", dest="exit_code", type=int, required=True)
    dec.set_defaults(func=run_decide)
    exc = inner.add_parser("exclude", help="just after scontrol requeue: set the job's ExcNodeList to the run's")
    exc.add_argument("run_dir", type=Path)
    exc.add_argument("--job", required=True, help="the requeued job (array task: <array id>_<task id>)")
    exc.set_defaults(func=run_exclude)
    spare = inner.add_parser(
        "spare-step", help="after a failure: print the nodes of a restart inside the job, or nothing"
    )
    spare.add_argument("run_dir", type=Path)
    spare.set_defaults(func=run_spare_step)
    for name, what in (
        ("chain-next", "submit the job that continues this chained run (once per attempt)"),
        ("chain-drop", "the run ends here: cancel a successor submitted at the signal"),
        ("chain-check", "a chained successor or requeued job starts: exit 1 if the run is cancelled or done"),
    ):
        chain = inner.add_parser(name, help=what)
        chain.add_argument("run_dir", type=Path)
        chain.add_argument("--why", default="")
        chain.set_defaults(func=run_chain)
    add_local(inner)
    from ddpctl.cli import remote_internal

    remote_internal.add(inner)


def add_local(inner: Any) -> None:
    """The local backend's detached processes: a job's supervisor and a sweep's queue."""
    local = inner.add_parser("local-run", help="the local backend's supervisor for one job")
    local.add_argument("run_dir", type=Path)
    local.add_argument("--job-number", type=int, required=True)
    local.add_argument("--lock-fd", type=int, default=None, help="the job's supervisor lock, inherited from submit")
    local.set_defaults(func=run_local)
    queue = inner.add_parser("local-sweep", help="the local backend's queue for one sweep: starts its tasks")
    queue.add_argument("sweep_dir", type=Path)
    queue.add_argument("--job-number", type=int, required=True)
    queue.add_argument("--max-parallel", type=int, default=None)
    queue.add_argument("--lock-fd", type=int, default=None, help="the sweep's queue lock, inherited from submit")
    queue.set_defaults(func=run_local_sweep)


def run_batch_start(args: argparse.Namespace) -> int:
    from ddpctl.node import batch

    batch.batch_start(batch.run_dir_arg(args.run_dir), dict(os.environ), args.at)
    return 0


def run_on_signal(args: argparse.Namespace) -> int:
    from ddpctl.node import batch
    from ddpctl.slurm import commands

    env = dict(os.environ)
    job_id = env.get("SLURM_JOB_ID", "")

    def time_left() -> int | None:
        return batch.parse_time_left(commands.time_left(job_id))

    def fan_out(signal_name: str) -> None:
        if args.before_step:
            return  # every launcher takes the stop from its stop file as it arms
        from ddpctl.run.rundir import run_spec

        batch.wait_for_launchers(layout, batch.attempt_of(env), run_spec(layout).nodes)
        # Without --batch/--full this reaches every step task on every node, not the batch shell itself.
        commands.scancel(job_id, f"--signal={signal_name}")

    layout = batch.run_dir_arg(args.run_dir)
    event = batch.on_signal(layout, env, args.signal, time_left, fan_out)
    print(
        f"ddpctl: {args.signal} received ({event.kind}, {event.time_left_s} s left): "
        "stopping all ranks at an agreed step",
        flush=True,
    )
    from ddpctl.run.rundir import run_spec

    if run_spec(layout).requeue.mode == "chain":
        from ddpctl.node import chain

        # Now, not after the checkpoint: a preempted job may be cancelled at the end of its grace time.
        successor = chain.submit_successor(layout, env, f"{event.kind} signal")
        print(f"ddpctl: chain: successor job {successor} submitted (starts after this job ends)", flush=True)
    return 0


def run_decide(args: argparse.Namespace) -> int:
    from ddpctl.node import batch

    decision = batch.decide_run(batch.run_dir_arg(args.run_dir), dict(os.environ), args.exit_code, in_slurm_job=True)
    print(decision.action)
    print(f"ddpctl: {decision.action}: {decision.reason}", file=sys.stderr, flush=True)
    return decision.exit_code


def run_spare_step(args: argparse.Namespace) -> int:
    from ddpctl.errors import DdpctlError
    from ddpctl.node import batch, spare

    try:
        nodes = spare.restart_here(batch.run_dir_arg(args.run_dir), dict(os.environ))
    except (OSError, DdpctlError) as err:  # the requeue stands: a restart that cannot be recorded is not made
        print(f"ddpctl: no restart inside the job: {err}", file=sys.stderr, flush=True)
        return 1
    if nodes:
        print(nodes)
        print(f"ddpctl: restarting inside the job on {nodes} (spare_nodes)", file=sys.stderr, flush=True)
    return 0


def run_exclude(args: argparse.Namespace) -> int:
    from ddpctl.errors import DdpctlError
    from ddpctl.node import batch, excluding

    try:
        nodes = excluding.update_job(batch.run_dir_arg(args.run_dir), args.job)
    except (OSError, DdpctlError) as err:  # the requeue stands; only the placement is not steered
        print(f"ddpctl: job {args.job}: excluded nodes not set: {err}", file=sys.stderr, flush=True)
        return 1
    print(f"ddpctl: job {args.job}: ExcNodeList={','.join(nodes)}", file=sys.stderr, flush=True)
    return 0


def run_chain(args: argparse.Namespace) -> int:
    from ddpctl.node import batch, chain

    layout, env = batch.run_dir_arg(args.run_dir), dict(os.environ)
    if args.internal_command == "chain-check":
        refusal = chain.may_start(layout, env)
        if refusal is None:
            return 0
        # stdout: the status the batch script exits with instead of training (templates/ddp.sbatch.j2).
        print(refusal.exit_code)
        print(
            f"ddpctl: not starting attempt {batch.attempt_of(env)}: {refusal.reason}; the job exits "
            f"{refusal.exit_code}",
            file=sys.stderr,
        )
        return 1
    if args.internal_command == "chain-drop":
        dropped = chain.drop_successor(layout, env, args.why or "the run finished")
        if dropped:
            print(f"ddpctl: chain: successor job {dropped} cancelled", file=sys.stderr)
        return 0
    successor = chain.submit_successor(layout, env, args.why or "requeue decision")
    print(
        f"ddpctl: chain: {'successor job ' + successor if successor else 'run cancelled: no successor'}",
        file=sys.stderr,
    )
    return 0


def run_local(args: argparse.Namespace) -> int:
    from ddpctl.backends.local.supervisor import supervise

    return supervise(args.run_dir.resolve(), args.job_number, args.lock_fd)


def run_local_sweep(args: argparse.Namespace) -> int:
    from ddpctl.backends.local.sweep import serve

    # The inherited lock (args.lock_fd) stays open for the queue's life: it is how status knows the queue lives.
    return serve(args.sweep_dir.resolve(), args.job_number, args.max_parallel)
