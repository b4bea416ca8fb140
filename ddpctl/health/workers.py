"""Which processes the hang watchdog may signal: only the workers its own launcher started.

A rank's placement file (`attempt-N/rank-<r>.json`) names the pid to send the dump signal to, but the run dir is
writable by the job: a rewritten file named an unrelated process (the dump signal's default action terminates),
and `pid: -1` would have signalled every process the user may signal. So a pid is signalled only when /proc says
it descends from this launcher's torchrun (its workers are torchrun's children; a container runtime may add a
level or two) and no process on the way started before torchrun did, and the signal goes through a pidfd opened
before that check, so a pid reused after it is never hit.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

MAX_DEPTH = 4  # torchrun -> worker, or torchrun -> a container runtime's process or two -> worker
PID_MAX = 1 << 22  # Linux's highest pid_max


def stat_of(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks since boot) from /proc/<pid>/stat; None when it is gone."""
    try:
        with Path(f"/proc/{pid}/stat").open("rb") as stat:
            text = stat.read(4096)
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    fields = text[text.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def valid_pid(pid: Any) -> bool:
    return isinstance(pid, int) and not isinstance(pid, bool) and 1 < pid <= PID_MAX and pid != os.getpid()


def started_by(pid: Any, torchrun: int) -> bool:
    """Whether `pid` is a process `torchrun` (this launcher's child) started, directly or a few levels down."""
    own = stat_of(torchrun) if valid_pid(torchrun) else None
    if own is None or not valid_pid(pid) or pid == torchrun:
        return False
    current = pid
    for _ in range(MAX_DEPTH):
        found = stat_of(current)
        if found is None or found[1] < own[1]:
            return False  # gone, or started before torchrun: not one of its processes
        if found[0] == torchrun:
            return True
        current = found[0]
    return False


def signal_worker(pid: Any, torchrun: int | None, signum: int) -> bool:
    """Send `signum` to `pid` if it is one of torchrun's workers; whether it was sent."""
    if torchrun is None or not valid_pid(pid):
        return False
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False  # gone already
    try:
        if not started_by(pid, torchrun):
            return False
        signal.pidfd_send_signal(handle, signum)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)
