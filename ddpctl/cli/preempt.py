"""`ddpctl preempt JOB_ID|NAME [--as timeout|preemption]`: rehearse the stop-checkpoint-requeue path."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ddpctl.cli.common import add_job_arg


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "preempt",
        help="deliver the warning signal the way Slurm would (rehearse checkpoint + requeue)",
        description="Sends the spec's requeue.signal the way Slurm delivers it for the job's backend before a "
        "time limit or on preemption (sbatch: to the batch shell; submitit: to every task; local: to the "
        "supervisor): all ranks stop at an agreed step, checkpoint, and the job requeues itself.",
    )
    add_job_arg(parser)
    parser.add_argument(
        "--wait",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="wait this long for a queued job to start running first (default 600; 0: no wait)",
    )
    parser.add_argument(
        "--as",
        dest="kind",
        choices=["preemption", "timeout"],
        default="preemption",
        help="which budget the requeue is charged to (default: preemption)",
    )
    parser.set_defaults(func=run)


LISTENER_WAIT_S = 60.0  # a just-started job's ranks need a moment (torch import, rendezvous) before they listen


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.backends.control import wait_until_running

    job = api.job(args.job)
    record = job.record
    state = wait_until_running(record, args.wait, say)
    if state.state == "RUNNING":
        unheard_after_wait(record, min(args.wait, LISTENER_WAIT_S), say)
    job.preempt(args.kind)
    print(
        f"sent the {args.kind} warning to job {record.job_id} ({record.name}); follow with "
        f"`ddpctl logs -f {record.job_id}`"
    )
    unheard = unheard_after_wait(record, 0, say)
    if unheard:
        say(f"ddpctl: WARNING: {unheard}")
    return 0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def unheard_after_wait(record: Any, timeout_s: float, say: Callable[[str], None]) -> str | None:
    """Wait (bounded) until some rank listens for stops; the plain statement if none does."""
    import time
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.run.stoptruth import listening_now
    from ddpctl.spec import load_spec

    layout = RunLayout(Path(record.run_dir))
    try:
        script_signal = load_spec(layout.spec_file, check_paths=False).requeue.script_signal
    except Exception:
        script_signal = None
    deadline = time.monotonic() + timeout_s
    unheard = listening_now(layout, script_signal)
    if unheard and timeout_s > 0:
        say(f"waiting up to {timeout_s:.0f} s for a rank of job {record.job_id} to listen for stops")
        while unheard and time.monotonic() < deadline:
            time.sleep(0.5)
            unheard = listening_now(layout, script_signal)
    return unheard
