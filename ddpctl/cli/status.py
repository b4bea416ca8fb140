"""`ddpctl status [JOB_ID|NAME] [--json]`: requeue-aware state of one job (default: the newest)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
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

    job = api.job(args.job)
    record, state = job.record, job.status()
    if args.json:
        print(json.dumps({"job_id": record.job_id, "name": record.name, "backend": record.backend,
                          "run_dir": record.run_dir, **asdict(state)}))
        return 0
    from ddpctl.cli.waiting import describe

    print(f"{record.job_id}  {record.name}  {describe(state)}")
    print(f"  backend {record.backend}, run dir {record.run_dir}")
    return 0
