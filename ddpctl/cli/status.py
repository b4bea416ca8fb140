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
    code = code_info(record.run_dir)
    if args.json:
        print(json.dumps({"job_id": record.job_id, "name": record.name, "backend": record.backend,
                          "run_dir": record.run_dir, **asdict(state), "code": code}))
        return 0
    from ddpctl.cli.submit import code_line
    from ddpctl.cli.waiting import describe

    print(f"{record.job_id}  {record.name}  {describe(state)}")
    print(f"  backend {record.backend}, run dir {record.run_dir}")
    print(f"  {code_line(record.run_dir)}")
    return 0


def code_info(run_dir: str) -> dict[str, Any] | None:
    """The run's code snapshot for --json: mode, commit, branch, dirty, tree (None: not snapshotted)."""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import read_info

    info = read_info(RunLayout(Path(run_dir)).snapshot_file)
    if info is None:
        return None
    return {"mode": info.mode, "commit": info.commit, "branch": info.branch, "dirty": info.dirty,
            "tree": info.tree, "path": info.path}
