"""`ddpctl preempt JOB_ID|NAME [--as timeout|preemption]`: rehearse the stop-checkpoint-requeue path."""

from __future__ import annotations

import argparse
from typing import Any


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "preempt", help="deliver the warning signal the way Slurm would (rehearse checkpoint + requeue)",
        description="Sends the spec's requeue.signal the way Slurm delivers it for the job's backend before a "
        "time limit or on preemption (sbatch: to the batch shell; submitit: to every task; local: to the "
        "supervisor): all ranks stop at an agreed step, checkpoint, and the job requeues itself.",
    )
    parser.add_argument("job", help="job id or name")
    parser.add_argument("--as", dest="kind", choices=["preemption", "timeout"], default="preemption",
                        help="which budget the requeue is charged to (default: preemption)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl.backends import get_backend
    from ddpctl.backends.control import control
    from ddpctl.backends.names import resolve
    from ddpctl.run.registry import Registry

    record = resolve(Registry.from_env(), args.job)
    control(record, "preempt", lambda: get_backend(record.backend).preempt(record, args.kind))
    print(f"sent the {args.kind} warning to job {record.job_id} ({record.name}); follow with "
          f"`ddpctl logs -f {record.job_id}`")
    warn_if_unheard(record)
    return 0


def warn_if_unheard(record: Any) -> None:
    import sys
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.run.stoptruth import listening_now
    from ddpctl.spec import load_spec

    layout = RunLayout(Path(record.run_dir))
    try:
        script_signal = load_spec(layout.spec_file, check_paths=False).requeue.script_signal
    except Exception:
        script_signal = None
    unheard = listening_now(layout, script_signal)
    if unheard:
        print(f"ddpctl: WARNING: {unheard}", file=sys.stderr)
