"""`submit --wait`: follow a job's state until it ends, with a live status line on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ddpctl import exitcodes
from ddpctl.backends import current_state
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState

POLL_S = 1.0


def describe(state: JobState, *, elapsed: bool = True) -> str:
    parts = [state.state]
    if state.reason:
        parts.append(f"({state.reason})")
    if state.nodes and state.state == "RUNNING":
        parts.append(f"on {state.nodes}")
    if state.restarts:
        parts.append(f"restart {state.restarts}")
    if elapsed and state.elapsed:
        parts.append(state.elapsed)
    return " ".join(parts)


def exit_status(state: JobState) -> int:
    if state.state == "COMPLETED":
        return exitcodes.OK
    if state.exit_code not in (None, exitcodes.OK):
        return int(state.exit_code)
    return exitcodes.FAILURE


def poll_until_terminal(record: JobRecord, show: Callable[[str], None], *, live: bool,
                        query: Callable[[JobRecord], JobState] = current_state) -> JobState:
    """Show each change of state; a live status line also shows the ticking elapsed time."""
    from ddpctl.api import Job

    shown = [""]

    def on_state(state: JobState) -> None:
        text = describe(state, elapsed=live)
        if text != shown[0]:
            show(text)
            shown[0] = text

    return Job(record, state_fn=query).wait(poll_s=POLL_S, on_state=on_state)


def wait_for_job(record: JobRecord) -> int:
    label = f"job {record.job_id} ({record.name})"
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console()
        with console.status(label) as status:
            state = poll_until_terminal(record, lambda text: status.update(f"{label}: {text}"), live=True)
        console.print(f"{label}: {describe(state)}")
    else:
        state = poll_until_terminal(record, lambda text: print(f"{label}: {text}", flush=True), live=False)
    return exit_status(state)
