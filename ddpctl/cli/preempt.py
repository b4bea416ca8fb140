"""`ddpctl preempt JOB_ID|NAME [--as timeout|preemption]`: rehearse the stop-checkpoint-requeue path."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ddpctl.cli.common import add_cluster_arg, add_job_arg, found_remote, refuse_sweep, remote_ref, remote_text


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "preempt",
        help="deliver the warning signal the way Slurm would (rehearse checkpoint + requeue)",
        description="Sends the spec's requeue.signal the way Slurm delivers it for the job's backend before a "
        "time limit or on preemption (sbatch: to the batch shell; submitit: to every task; local: to the "
        "supervisor): all ranks stop at an agreed step, checkpoint, and the job requeues itself.",
    )
    add_job_arg(parser)
    parser.add_argument(
        "--wait",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="wait this long for a queued job to start running first (default 600; 0: no wait)",
    )
    parser.add_argument(
        "--as",
        dest="kind",
        choices=["preemption", "timeout"],
        default="preemption",
        help="which budget the requeue is charged to (default: preemption)",
    )
    add_cluster_arg(parser)
    parser.set_defaults(func=run)


LISTENER_WAIT_S = 60.0  # a just-started job's ranks need a moment (torch import, rendezvous) before they listen
COUNTDOWN_S = 15.0  # how often that wait says how long it has left
STATE_POLL_S = 1.0  # how often that wait asks whether the job ended meanwhile (squeue on Slurm)


def remote_words(args: argparse.Namespace) -> list[str]:
    from ddpctl.remote.passthrough import option

    return ["preempt", option("--wait", args.wait), option("--as", args.kind), *(["--", args.job] if args.job else [])]


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.backends.control import wait_until_running

    remote = bool(args.cluster) or remote_ref(args)  # a remote sweep's name: its array job id there
    if not remote:
        refuse_sweep("preempt", args.job)
    job = None if remote else api.job(args.job, warn=say)
    if remote or found_remote(args, job):
        return remote_text(args.cluster, remote_words(args), timeout=args.wait + LISTENER_WAIT_S + 60)
    assert job is not None
    record = job.record
    state = wait_until_running(record, args.wait, say)
    if state.state == "RUNNING" and (may_announce(record) or script_signal_of(record)):
        wait_for_listener(record, LISTENER_WAIT_S, say)  # returns early when the job ends: preempt says so
    job.preempt(args.kind)
    print(
        f"sent the {args.kind} warning to job {record.job_id} ({record.name}); follow with "
        f"`ddpctl logs -f {record.job_id}`"
    )
    unheard = unheard_now(record)
    if unheard:
        say(f"ddpctl: WARNING: {unheard}")
    return 0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def may_announce(record: Any) -> bool:
    """Whether a rank of this run may still announce that it listens: submit recorded whether the script can
    (`stop-scan`); a plain script never will, so its stop is sent at once. Runs without the record: wait."""
    from pathlib import Path

    from ddpctl.run import history
    from ddpctl.run.layout import RunLayout

    scans = history.load(RunLayout(Path(record.run_dir)).events).all(history.StopScanned)
    return scans[0].announces if scans else True


def script_signal_of(record: Any) -> str | None:
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.spec import load_spec

    try:
        return load_spec(RunLayout(Path(record.run_dir)).spec_file, check_paths=False).requeue.script_signal
    except Exception:
        return None


def unheard_now(record: Any) -> str | None:
    """None when some rank listens for stops (or the script asked for a signal); else the plain statement."""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.run.stoptruth import listening_now

    return listening_now(RunLayout(Path(record.run_dir)), script_signal_of(record))


def ready_now(record: Any) -> bool:
    """Some rank listens; for a script that asked for a signal of its own, every node's launcher of the newest
    attempt is up (a stop sent while a launcher's interpreter starts finds no handler there on a cluster)."""
    if unheard_now(record) is not None:
        return False
    if not script_signal_of(record):
        return True
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.run.stoptruth import launchers_up

    return launchers_up(RunLayout(Path(record.run_dir)))


def wait_for_listener(
    record: Any, timeout_s: float, say: Callable[[str], None], state_fn: Callable[[Any], Any] | None = None
) -> None:
    """Wait (bounded) until some rank listens for stops, or the job ends (no use waiting for it then)."""
    import time

    from ddpctl.backends import current_state

    ask = state_fn or current_state
    if ready_now(record):
        return
    what = "every node's launcher" if script_signal_of(record) else "a rank"
    say(f"waiting up to {timeout_s:.0f} s for {what} of job {record.job_id} to listen for stops")
    deadline = time.monotonic() + timeout_s
    next_state, next_said = time.monotonic() + STATE_POLL_S, time.monotonic() + COUNTDOWN_S
    while time.monotonic() < deadline and not ready_now(record):
        if time.monotonic() >= next_state:
            if ask(record).terminal:
                return
            next_state = time.monotonic() + STATE_POLL_S
        if time.monotonic() >= next_said:  # a countdown: a minute's silence reads as a hang
            say(f"still waiting for {what} to listen: {deadline - time.monotonic():.0f} s left, then the stop is sent")
            next_said = time.monotonic() + COUNTDOWN_S
        time.sleep(0.5)
