"""`ddpctl watch`: one pass over the registry's live runs, for cron or a login-node loop (ddpctl.health.watch)."""

from __future__ import annotations

import argparse
from typing import Any


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "watch",
        help="one pass over live runs: tell a vanished job or a stalled one (for cron)",
        description=(
            "Looks at every run of the registry that has not ended by its own decision, and records and tells "
            "(through the run's notify: block) what the job cannot report itself: it vanished without a decision, "
            "or it makes no progress past its allowances while the backend says RUNNING. Each finding is told once. "
            "Prints one line per new finding; exit status 0. Run it from cron, e.g. every 5 minutes."
        ),
    )
    parser.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    import time

    from ddpctl import api
    from ddpctl.health.watch import act, judge, newest_step
    from ddpctl.run import history
    from ddpctl.run.layout import RunLayout
    from ddpctl.run.rundir import run_spec
    from ddpctl.sanitize import visible

    for job in api.jobs():
        layout = RunLayout(job.run_dir)
        past = history.load(layout.events)
        outcome = past.outcome()
        if past.cancelled() or (outcome is not None and outcome.action == "finish"):
            continue  # ended by its own decision: nothing to ask the backend
        try:
            health = run_spec(layout).health
        except Exception as err:  # a run dir gone or damaged: say so, go on with the others
            print(f"{visible(job.job_id)}: not judged: {visible(str(err))[:200]}")
            continue
        finding = judge(job.status(), past, health, newest_step(layout), time.time())
        if finding is not None and act(layout, past, finding):
            print(f"{visible(job.job_id)} ({visible(job.record.name)}): {finding.kind}: {visible(finding.why)}")
    return 0
