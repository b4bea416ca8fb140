"""`submit --wait`: follow a job's state until it ends, with a live status line on a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ddpctl import exitcodes
from ddpctl.registry import JobRecord
from ddpctl.state import JobState, current_state

POLL_S = 1.0


def describe(state: JobState) -> str:
    parts = [state.state]
    if state.reason:
        parts.append(f"({state.reason})")
    if state.nodes and state.state == "RUNNING":
        parts.append(f"on {state.nodes}")
    if state.restarts:
        parts.append(f"restart {state.restarts}")
    if state.elapsed:
        parts.append(state.elapsed)
    return " ".join(parts)


def exit_status(state: JobState) -> int:
    if state.state == "COMPLETED":
        return exitcodes.OK
    if state.exit_code not in (None, exitcodes.OK):
        return int(state.exit_code)  # type: ignore[arg-type]
    return exitcodes.FAILURE


def poll_until_terminal(record: JobRecord, show: Callable[[str], None],
                        query: Callable[[JobRecord], JobState] = current_state) -> JobState:
    last = ""
    while True:
        state = query(record)
        text = describe(state)
        if text != last:
            show(text)
            last = text
        if state.terminal:
            return state
        time.sleep(POLL_S)


def wait_for_job(record: JobRecord) -> int:
    label = f"job {record.job_id} ({record.name})"
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console()
        with console.status(label) as status:
            state = poll_until_terminal(record, lambda text: status.update(f"{label}: {text}"))
        console.print(f"{label}: {describe(state)}")
    else:
        state = poll_until_terminal(record, lambda text: print(f"{label}: {text}", flush=True))
    return exit_status(state)
