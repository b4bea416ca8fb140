"""`ddpctl list [--json]` and `ddpctl cancel JOB_ID|NAME`."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from typing import Any

from ddpctl.cli.common import add_cluster_arg, add_job_arg, found_remote, note, remote_ref, remote_text


def add(sub: Any) -> None:
    lister = sub.add_parser(
        "list",
        help="jobs in the local registry, and those submitted from here to remote clusters",
        description="The jobs of this registry ($DDPCTL_HOME, default ~/.local/state/ddpctl), oldest first, "
        "with each job's current state (a squeue call per Slurm job; --no-state skips it). Jobs submitted from "
        "here to remote clusters are listed with them, in a cluster column, their states asked of each "
        "cluster's ddpctl (one `list --json` there per cluster); a cluster that cannot answer is one line on "
        "stderr and its jobs are listed without a state. --prune prunes this registry only.",
    )
    lister.add_argument("--json", action="store_true", help="one JSON object per line")
    lister.add_argument("--no-state", action="store_true", help="do not query each job's current state")
    lister.add_argument(
        "--tasks", action="store_true", help="each sweep's tasks as rows under its line (--json lists them always)"
    )
    lister.add_argument(
        "--prune",
        action="store_true",
        help="drop the records of jobs that ended and were submitted more than --older-than days ago",
    )
    lister.add_argument(
        "--older-than", type=days, default=30.0, metavar="DAYS", help="age bound of --prune (default 30; 0: all)"
    )
    lister.set_defaults(func=run_list)
    cancel = sub.add_parser(
        "cancel",
        help="cancel a job",
        description="Cancel a queued or running job on its backend (a chained run: every job of it). A job "
        "that already ended is said so, with exit status 1.",
    )
    add_job_arg(cancel)
    add_cluster_arg(cancel)
    cancel.set_defaults(func=run_cancel)


def days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number of days >= 0")
    return value


def run_prune(older_than_days: float) -> int:
    from ddpctl.backends.prune import prune
    from ddpctl.run.registry import Registry

    registry = Registry.from_env()
    done = prune(registry, time.time(), older_than_days * 86400.0)
    print(
        f"pruned {done.dropped} record(s) of jobs that ended and were submitted more than {older_than_days:g} "
        f"day(s) ago; {done.kept} kept in {registry.path}"
    )
    return 0


def run_list(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.proc import in_background

    if args.prune:
        return run_prune(args.older_than)

    from ddpctl.cli.remote_list import remote_lines, remote_rows

    records = [job.record for job in api.jobs()]
    remote = in_background(lambda: remote_rows(not args.no_state))  # the clusters are asked beside squeue here
    rows: list[tuple[str | None, Any, str, str | None]]
    rows = [(None, *row) for row in list_rows(records, not args.no_state, each_task=args.json, under=args.tasks)]
    taken = {ref for record in records for ref in (record.job_id, record.sweep, record.name) if ref}
    rows += remote_lines(remote.result(), each_task=args.json, under=args.tasks, taken=taken)
    rows.sort(key=lambda row: row[1].submitted_at)  # stable: a sweep's line stays where its tasks were
    if args.json:
        for cluster, record, _, state in rows:
            print(json.dumps({**asdict(record), "state": state, "cluster": cluster}))
        return 0
    from rich.console import Console
    from rich.table import Table

    # Fits 80 columns: the run dir (long) is in `status` and `list --json`; long names are cut with an ellipsis.
    # The cluster column only when jobs were submitted to remote clusters (local jobs: "-").
    clustered = any(row[0] is not None for row in rows)
    table = Table(
        "job", "name", "state", "backend", *(["cluster"] if clustered else []), "submitted", box=None, pad_edge=False
    )
    for cluster, record, shown_id, state in rows:
        submitted = time.strftime("%m-%d %H:%M", time.localtime(record.submitted_at))
        where = [cluster or "-"] if clustered else []
        table.add_row(shown_id, record.name, state or "-", record.backend, *where, submitted)
    table.columns[1].overflow = "ellipsis"
    table.columns[1].max_width = 28
    Console(width=min(Console().width, 100)).print(table)
    return 0


def list_rows(
    records: list[Any], with_state: bool, each_task: bool = False, under: bool = False
) -> list[tuple[Any, str, str | None]]:
    """(record, the id shown, its state) per line: a job as itself, a sweep once as its array job with its
    tasks counted (`4 tasks: 1 running / 2 pending / 1 completed / 0 failed`) and (`under`, --tasks) its tasks
    indented under that line, or (`each_task`, --json) each task as a job."""
    from ddpctl import api
    from ddpctl.run.sweeps import count_line, group

    rows: list[tuple[Any, str, str | None]] = []
    for record, tasks in group(records):
        if not tasks:
            rows.append((record, record.job_id, api.Job(record).status().state if with_state else None))
            continue
        from ddpctl.backends import task_states

        states = task_states(tasks) if with_state else None
        if each_task:
            rows += [(task, task.job_id, states[i] if states else None) for i, task in enumerate(tasks)]
            continue
        line = count_line(states) if states is not None else f"{len(tasks)} tasks"
        rows.append((record, f"{record.sweep} (sweep)", line))
        if under:
            rows += [(task, f"  {task.job_id}", states[i] if states else None) for i, task in enumerate(tasks)]
    return rows


def run_cancel(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.api.sweeps import find_sweep
    from ddpctl.backends.control import label

    if args.cluster or remote_ref(args):  # a remote sweep's name: the whole sweep, there
        return remote_text(args.cluster, ["cancel", "--", args.job] if args.job else ["cancel"])
    sweep = find_sweep(args.job) if args.job is not None else None
    if sweep is not None:
        sweep.cancel()
        print(f"cancelled sweep {sweep.name}: {sweep.kind} {sweep.array_job}, {len(sweep.jobs)} tasks")
        return 0
    job = api.job(args.job, warn=note)
    if found_remote(args, job):
        return remote_text(args.cluster, ["cancel", "--", args.job])
    job.cancel()
    print(f"cancelled {label(job.record)}")
    return 0
