"""`ddpctl status [JOB_ID|NAME] [--json]`: requeue-aware state of one job (default: the newest)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpctl.run.registry import JobRecord


def add(sub: Any) -> None:
    parser = sub.add_parser("status", help="state of a job: PENDING/RUNNING/REQUEUED/..., restarts, nodes",
                            description="Works without accounting (squeue, scontrol, the run's events).")
    parser.add_argument("job", nargs="?", help="job id or name (default: the most recently submitted job)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.set_defaults(func=run)


def find_record(job: str | None) -> JobRecord:
    """The named job, or the most recently submitted one."""
    from ddpctl.errors import JobNotFound
    from ddpctl.run.registry import Registry

    registry = Registry.from_env()
    if job is None:
        records = registry.records()
        if not records:
            raise JobNotFound(f"no jobs in the registry {registry.path} yet: submit one with `ddpctl submit`")
        return records[-1]
    return registry.find(job)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ddpctl.backends import current_state
    from ddpctl.health.report import collect, text_lines

    record = find_record(args.job)
    state = current_state(record)
    health = collect(Path(record.run_dir), running=state.state == "RUNNING")
    if args.json:
        print(json.dumps({"job_id": record.job_id, "name": record.name, "backend": record.backend,
                          "run_dir": record.run_dir, **asdict(state), **health}))
        return 0
    from ddpctl.cli.waiting import describe

    print(f"{record.job_id}  {record.name}  {describe(state)}")
    print(f"  backend {record.backend}, run dir {record.run_dir}")
    for line in text_lines(health):
        print(line)
    return 0
