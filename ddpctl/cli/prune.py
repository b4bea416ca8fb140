"""`ddpctl prune [--older-than DAYS] [--dry-run]`: remove the run dirs of jobs that ended long ago, and their
registry records; never a live job's."""

from __future__ import annotations

import argparse
import time
from typing import Any

from ddpctl.cli.jobs import days


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "prune",
        help="remove the run dirs (code copy, logs, checkpoints) of jobs that ended long ago",
        description="Removes the run dir of each job of this registry that was submitted more than --older-than "
        "days ago and has certainly ended (a local job: nobody holds its run dir's lock; a Slurm job: squeue "
        "lists none of its jobs, and when squeue cannot answer nothing of Slurm's is removed), then its record "
        "(as `list --prune`). A running, queued or requeued job is never touched. Only a directory named after "
        "its job and holding its job.yaml is removed; links in it are removed, never followed.",
    )
    parser.add_argument(
        "--older-than", type=days, default=30.0, metavar="DAYS", help="age bound (default 30; 0: every ended job)"
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl.backends.prune import prune_runs
    from ddpctl.run.registry import Registry

    registry = Registry.from_env()
    removed, records = prune_runs(registry, time.time(), args.older_than * 86400.0, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for path in removed:
        print(f"{verb} {path}")
    print(
        f"{verb} {len(removed)} run dir(s) and {records} record(s) of jobs that ended and were submitted more than "
        f"{args.older_than:g} day(s) ago"
    )
    return 0
