"""`ddpctl preempt JOB_ID|NAME [--as timeout|preemption]`: rehearse the stop-checkpoint-requeue path."""

from __future__ import annotations

import argparse
from typing import Any

from ddpctl.cli.common import add_job_arg


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "preempt", help="deliver the warning signal the way Slurm would (rehearse checkpoint + requeue)",
        description="Sends the spec's requeue.signal the way Slurm delivers it for the job's backend before a "
        "time limit or on preemption (sbatch: to the batch shell; submitit: to every task; local: to the "
        "supervisor): all ranks stop at an agreed step, checkpoint, and the job requeues itself.",
    )
    add_job_arg(parser)
    parser.add_argument("--as", dest="kind", choices=["preemption", "timeout"], default="preemption",
                        help="which budget the requeue is charged to (default: preemption)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api

    job = api.job(args.job)
    job.preempt(args.kind)
    print(f"sent the {args.kind} warning to job {job.job_id} ({job.name}); follow with "
          f"`ddpctl logs -f {job.job_id}`")
    return 0
