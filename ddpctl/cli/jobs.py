"""`ddpctl list [--json]` and `ddpctl cancel JOB_ID|NAME`."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from typing import Any


def add(sub: Any) -> None:
    lister = sub.add_parser("list", help="jobs in the local registry")
    lister.add_argument("--json", action="store_true", help="one JSON object per line")
    lister.add_argument("--no-state", action="store_true", help="do not query each job's current state")
    lister.set_defaults(func=run_list)
    cancel = sub.add_parser("cancel", help="cancel a job")
    cancel.add_argument("job", help="job id or name")
    cancel.set_defaults(func=run_cancel)


def run_list(args: argparse.Namespace) -> int:
    from ddpctl.backends import current_state
    from ddpctl.run.registry import Registry

    records = Registry.from_env().records()
    states = {} if args.no_state else {r.job_id: current_state(r).state for r in records}
    if args.json:
        for record in records:
            print(json.dumps({**asdict(record), "state": states.get(record.job_id)}))
        return 0
    from rich.console import Console
    from rich.table import Table

    # Fits 80 columns: the run dir (long) is in `status` and `list --json`; long names are cut with an ellipsis.
    table = Table("job", "name", "state", "backend", "submitted", box=None, pad_edge=False)
    for record in records:
        submitted = time.strftime("%m-%d %H:%M", time.localtime(record.submitted_at))
        table.add_row(record.job_id, record.name, states.get(record.job_id) or "-", record.backend, submitted)
    table.columns[1].overflow = "ellipsis"
    table.columns[1].max_width = 28
    Console(width=min(Console().width, 100)).print(table)
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    from ddpctl.backends import get_backend
    from ddpctl.backends.control import control, label
    from ddpctl.backends.names import resolve
    from ddpctl.run.registry import Registry

    record = resolve(Registry.from_env(), args.job)
    control(record, "cancel", lambda: get_backend(record.backend).cancel(record))
    print(f"cancelled {label(record)}")
    return 0
