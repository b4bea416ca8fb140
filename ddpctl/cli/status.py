"""`ddpctl status [JOB_ID|NAME] [--json]`: requeue-aware state of one job (default: the newest)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ddpctl.cli.common import add_job_arg, note


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "status",
        help="state of a job: PENDING/RUNNING/REQUEUED/..., restarts, nodes",
        description="Works without accounting (squeue, scontrol, the run's events).",
    )
    add_job_arg(parser, "job id or name (default: the most recently submitted job)", nargs="?")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ddpctl import api
    from ddpctl.cli.jobreport import lines, payload
    from ddpctl.health.report import collect, text_lines

    job = api.job(args.job, warn=note)
    record, state = job.record, job.status()
    code = code_info(record.run_dir)
    health = collect(Path(record.run_dir), running=state.state == "RUNNING")
    if args.json:
        print(json.dumps({**payload(record, state), "code": code, **health}))
        return 0
    from ddpctl.cli.submit import code_line

    text = lines(record, state)
    at = next(i for i, line in enumerate(text) if line.startswith("  backend ")) + 1
    print("\n".join([*text[:at], f"  {code_line(record.run_dir)}", *text[at:], *text_lines(health)]))
    return 0


def code_info(run_dir: str) -> dict[str, Any] | None:
    """The run's code snapshot for --json: mode, commit, branch, dirty, tree (None: not snapshotted)."""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import read_info

    info = read_info(RunLayout(Path(run_dir)).snapshot_file)
    if info is None:
        return None
    return {
        "mode": info.mode,
        "commit": info.commit,
        "branch": info.branch,
        "dirty": info.dirty,
        "tree": info.tree,
        "path": info.path,
    }
