"""`ddpctl status [JOB_ID|NAME] [--json]`: requeue-aware state of one job (default: the newest)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ddpctl.cli.common import add_job_arg


def add(sub: Any) -> None:
    parser = sub.add_parser("status", help="state of a job: PENDING/RUNNING/REQUEUED/..., restarts, nodes",
                            description="Works without accounting (squeue, scontrol, the run's events).")
    add_job_arg(parser, "job id or name (default: the most recently submitted job)", nargs="?")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.cli.jobreport import lines, payload

    job = api.job(args.job)
    record, state = job.record, job.status()
    if args.json:
        print(json.dumps(payload(record, state)))
    else:
        print("\n".join(lines(record, state)))
    return 0
