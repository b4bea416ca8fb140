"""`ddpctl status [JOB_ID|NAME] [--json]`: requeue-aware state of one job (default: the newest)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ddpctl.cli.common import add_cluster_arg, add_job_arg, found_remote, note, remote_ref


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "status",
        help="state of a job: PENDING/RUNNING/REQUEUED/..., restarts, nodes",
        description="Works without accounting (squeue, scontrol, the run's events).",
    )
    add_job_arg(parser, "job id or name (default: the most recently submitted job)", nargs="?")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    add_cluster_arg(parser, "ask the ddpctl of this remote cluster (clusters.yaml) over SSH")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.cluster or remote_ref(args):
        return remote(args)
    from pathlib import Path

    from ddpctl import api
    from ddpctl.api.sweeps import find_sweep

    sweep = find_sweep(args.job) if args.job is not None else None
    if sweep is not None:
        print(sweep_status(sweep, args.json))
        return 0
    job = api.job(args.job, warn=note)
    if found_remote(args, job):
        return remote(args)  # before the run dir's readers are imported: none of them is needed for it
    from ddpctl.cli.jobreport import lines, payload
    from ddpctl.health.report import collect, text_lines

    record, state = job.record, job.status()
    code = code_info(record.run_dir)
    health = collect(Path(record.run_dir), running=state.state == "RUNNING")
    if args.json:
        print(json.dumps({**payload(record, state), "code": code, **health}))
        return 0
    from ddpctl.cli.submit import code_line

    text = lines(record, state)
    at = next(i for i, line in enumerate(text) if line.startswith("  backend ")) + 1
    quiet = last_log_lines(Path(record.run_dir), health) if state.state == "RUNNING" else []
    print("\n".join([*text[:at], f"  {code_line(record.run_dir)}", *text[at:], *text_lines(health), *quiet]))
    return 0


def sweep_status(sweep: Any, as_json: bool) -> str:
    """`status SWEEP`: a line per task (point, state, step, last loss, restarts), or one JSON object."""
    from ddpctl.health.results import read_task
    from ddpctl.sanitize import visible

    rows = []
    for job in sweep.jobs:
        state, result = job.status(), read_task(job.run_dir)
        loss = result.final.get("loss")
        rows.append((job.job_id, job.record.point or "", state.state, result.step, loss, state.restarts))
    if as_json:
        keys = ("task", "point", "state", "step", "loss", "restarts")
        tasks = [dict(zip(keys, row, strict=True)) for row in rows]
        return json.dumps({"sweep": sweep.array_job, "name": sweep.name, "tasks": tasks})
    table = [("task", "point", "state", "step", "loss", "restarts")]
    for task, point, state_name, step, loss, restarts in rows:
        shown = "-" if loss is None else f"{loss:.4g}"
        table.append((task, visible(point)[:60], state_name, "-" if step is None else str(step), shown, str(restarts)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    head = f"sweep {visible(sweep.name)}: {sweep.kind} {sweep.array_job}, {len(rows)} tasks"
    body = ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]
    return "\n".join([head, *body])


def remote(args: argparse.Namespace) -> int:
    """The remote `ddpctl status [--json] [JOB]`, shown here (ddpctl.remote.passthrough)."""
    from ddpctl import __version__
    from ddpctl.remote.passthrough import run_remote

    words = ["status", *(["--json"] if args.json else []), *(["--", args.job] if args.job else [])]
    shown = run_remote(args.cluster, words, __version__, as_json=args.json)
    print(shown.out)
    return shown.code


def last_log_lines(run_dir: Any, health: dict[str, Any], now: float | None = None) -> list[str]:
    """A running script without the heartbeat reports no step: show rank 0's last log line and its age instead
    (control characters made visible), so "step 130" in its log is seen. Nothing when ranks report progress."""
    import time

    from ddpctl.health.records import last_line, latest_attempt
    from ddpctl.run.layout import RunLayout
    from ddpctl.sanitize import visible

    layout = RunLayout(run_dir)
    attempt = latest_attempt(layout)
    if health.get("progress") or attempt is None:
        return []
    text, mtime = last_line(layout.rank_log(attempt, 0))
    if not text or mtime is None:
        return []
    age = max(0.0, (time.time() if now is None else now) - mtime)
    return [f"  last log line (rank 0, {age:.0f} s ago; no progress records): {visible(text)[:200]}"]


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
