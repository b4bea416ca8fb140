"""`ddpctl top [JOB]`: live view of every rank (or node) of a running job, from its run dir; ends with the job."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_cluster_arg, found_remote, note, refuse_sweep, remote_ref, remote_text

STATE_EVERY_S = 5.0  # the scheduler is asked about the job this often, the run dir is read every refresh


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "top",
        help="live view: step, step time, lag, silence, last log line per rank",
        description="Reads progress records and logs from the run dir (no node is touched). "
        "Marks stalls and stragglers, follows requeues, exits when the job ends. "
        "Ranks that do not fit the terminal are summarised per node.",
    )
    parser.add_argument("job", nargs="?", help="job id or name (default: the most recently submitted job)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="refresh period (default 1 s)")
    parser.add_argument("--once", action="store_true", help="print one frame and exit (no live screen)")
    parser.add_argument("--json", action="store_true", help="one frame's facts as one JSON object (implies --once)")
    add_cluster_arg(parser)
    parser.set_defaults(func=run)


def frame_facts(run_dir: Path, now: float) -> dict[str, Any]:
    """Everything one frame shows, read from the run dir of the job's latest attempt."""
    from ddpctl.cli.jobreport import cause_lines
    from ddpctl.health.rates import summarize
    from ddpctl.health.records import last_line, latest_attempt, placements, progress_records
    from ddpctl.health.view import rank_rows
    from ddpctl.logs.files import list_rank_logs
    from ddpctl.run import history
    from ddpctl.run.history import StragglerFlagged
    from ddpctl.run.layout import RunLayout
    from ddpctl.spec import HealthSettings, load_spec

    layout = RunLayout(run_dir)
    attempt = latest_attempt(layout)
    if attempt is None:
        return {"attempt": None, "rows": [], "summary": None, "notes": [], "causes": []}
    try:
        policy = load_spec(layout.spec_file, check_paths=False).health
    except Exception:
        policy = HealthSettings()
    records = progress_records(layout, attempt)
    logs = {rank: last_line(path) for rank, path in list_rank_logs(layout.attempt_dir(attempt)).items()}
    nodes = {rank: str(info.get("node", "?")) for rank, info in placements(layout, attempt).items()}
    events = history.load(layout.events).health(attempt)
    flagged = {e.rank for e in events if isinstance(e, StragglerFlagged)}
    return {
        "attempt": attempt,
        "rows": rank_rows(records, logs, nodes=nodes, flagged=flagged, policy=policy, now=now),
        "summary": summarize(records, now, policy.pause_s) if records else None,
        "notes": event_notes(events[-2:]),
        "causes": cause_lines(layout),  # what ended the earlier attempts, as status says it
    }


def event_notes(events: list[Any]) -> list[tuple[str, bool]]:
    """(line, severe) per health event shown under the table: a hang or an OOM kill is severe (red)."""
    from ddpctl.health.report import describe_event
    from ddpctl.run.history import Hung, OomKilled

    return [(describe_event(e), isinstance(e, (Hung, OomKilled))) for e in events]


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.backends import current_state

    remote = bool(args.cluster) or remote_ref(args)  # a remote sweep's name: its array job id there
    if not remote:
        refuse_sweep("top", args.job)
    job = None if remote else api.job(args.job, warn=note)
    if remote or found_remote(args, job):  # the cluster's ddpctl reads the run dir
        ref = ["--", args.job] if args.job else []
        if args.once or args.json:
            return remote_text(args.cluster, ["top", "--once", *(["--json"] if args.json else []), *ref])
        from ddpctl.cli.top_remote import live

        return live(args.cluster, ["top", "--once", "--json", *ref], args.interval)
    assert job is not None
    record = job.record
    state = current_state(record)
    if args.json:
        from ddpctl.health.topjson import as_json

        facts = frame_facts(Path(record.run_dir), time.time())
        print(json.dumps(as_json(record.job_id, record.name, state, facts)))
        return 0
    return draw(record, state, once=args.once, interval=args.interval)


def draw(record: Any, state: Any, *, once: bool, interval: float) -> int:
    """The local live screen: the run dir read every refresh, the scheduler asked every STATE_EVERY_S."""
    from rich.console import Console
    from rich.live import Live

    from ddpctl.backends import current_state
    from ddpctl.cli.top_render import ended_line, frame

    console, asked = Console(), time.monotonic()
    if once or state.terminal:
        console.print(frame(record, state, frame_facts(Path(record.run_dir), time.time()), console.size))
        return 0
    try:
        with Live(console=console, auto_refresh=False, screen=False, transient=False) as live:
            while True:
                if time.monotonic() - asked >= STATE_EVERY_S:
                    state, asked = current_state(record), time.monotonic()
                live.update(
                    frame(record, state, frame_facts(Path(record.run_dir), time.time()), console.size), refresh=True
                )
                if state.terminal:
                    break
                time.sleep(max(0.1, interval))
    except KeyboardInterrupt:
        return 130
    console.print(ended_line(record.job_id, state))
    return 0
