"""`submit --wait`: follow a job's state until it ends, with a live status line on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ddpctl.backends import current_state
from ddpctl.cli.jobreport import describe_state, exit_status, lines
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState

POLL_S = 1.0
PROGRESS_EVERY_S = 15.0  # at most one line a while for a moving step
KEEPALIVE_S = 300.0  # a line when nothing changed for this long: the wait is alive


def progress(record: JobRecord, state: JobState) -> str:
    """ ", step N" once rank 0 of a running job logged a step (read from the run's files)."""
    if state.state != "RUNNING":
        return ""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.run.summary import summarize

    step = summarize(RunLayout(Path(record.run_dir))).last_step
    return "" if step is None else f", step {step}"


def poll_until_terminal(
    record: JobRecord,
    show: Callable[[str], None],
    *,
    live: bool,
    query: Callable[[JobRecord], JobState] = current_state,
    clock: Callable[[], float] = time.monotonic,
) -> JobState:
    """A live status line is refreshed every poll (state, elapsed, step). Without a terminal, a line is printed
    only when something changes: the state (or its reason) at once, the step at most every PROGRESS_EVERY_S;
    and after KEEPALIVE_S with no change, the same line with its elapsed time, so a log shows the wait is alive."""
    from ddpctl.api import Job

    last_text, last_step, last_at = [""], [""], [clock()]

    def on_state(state: JobState) -> None:
        text, step = describe_state(state, elapsed=live), progress(record, state)
        since = clock() - last_at[0]
        moved = step != last_step[0] and since >= PROGRESS_EVERY_S
        if live or text != last_text[0] or moved or since >= KEEPALIVE_S:
            line = text + step
            if not live and state.state == "RUNNING" and state.elapsed:
                line += f", elapsed {state.elapsed}"
            show(line)
            last_text[0], last_step[0], last_at[0] = text, step, clock()

    return Job(record, state_fn=query).wait(poll_s=POLL_S, on_state=on_state)


def wait_for_job(record: JobRecord) -> int:
    try:
        return _wait_for_job(record)
    except KeyboardInterrupt:
        print(left_running(record), file=sys.stderr, flush=True)
        return 130


def left_running(record: JobRecord) -> str:
    """What Ctrl-C during a wait leaves behind: the job, running on without this command."""
    job = record.job_id
    return (
        f"\nstopped waiting; job {job} ({record.name}) keeps running: follow it with `ddpctl status {job}` or "
        f"`ddpctl logs -f {job}`, stop it with `ddpctl cancel {job}`"
    )


def _wait_for_job(record: JobRecord) -> int:
    label = f"job {record.job_id} ({record.name})"
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console()
        with console.status(label) as status:
            state = poll_until_terminal(record, lambda text: status.update(f"{label}: {text}"), live=True)
        console.print(f"{label}: {describe_state(state)}")
    else:
        state = poll_until_terminal(record, lambda text: print(f"{label}: {text}", flush=True), live=False)
    print("\n".join(lines(record, state)[1:]), flush=True)  # elapsed, restarts, last step, logs, checkpoints
    return exit_status(state)
