"""The process-local "stop requested" flag (torch-free, so the worker wrapper can import it cheaply).

Two sources set it: the stop signal (`$DDPCTL_STOP_SIGNAL`, which may reach a worker directly) and the
node-local stop file (`$DDPCTL_STOP_FILE`, created by `ddpctl launch` when the batch shell fans the signal
out). Neither source does any work beyond setting the flag: checkpointing inside a signal handler hangs or
corrupts (Lightning#21406), so the training loop agrees on a step with `StopAgreement` and saves there.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from ddpctl import safeio
from ddpctl.proc import signal_named
from ddpctl.run import envvars

POLL_INTERVAL_S = 0.2


@dataclass
class _Flag:
    # Plain attributes, not threading.Event: a signal handler that takes a lock the interrupted main thread
    # already holds would deadlock; a single attribute store is atomic under the GIL.
    requested: bool = False
    source: str | None = None
    time: float | None = None
    signal_installed: bool = False
    watcher: threading.Thread | None = None


_FLAG = _Flag()


def request_stop(source: str) -> None:
    """Set the flag (idempotent); the first source and time are kept for the stopped marker."""
    if not _FLAG.requested:
        _FLAG.source = source
        _FLAG.time = time.time()
        _FLAG.requested = True


def stop_requested() -> bool:
    """True once a stop was requested in this process (this rank's local view, not the agreed one)."""
    return _FLAG.requested


def stop_source() -> str | None:
    """What set the flag first: "signal:SIGUSR2", "file:<path>" or "manual"; None when not requested."""
    return _FLAG.source


def stop_time() -> float | None:
    """Epoch seconds when this process first noticed the stop request; None when not requested."""
    return _FLAG.time


def reset() -> None:
    """Clear the request (for tests and for a loop that handles a stop and then carries on)."""
    _FLAG.requested, _FLAG.source, _FLAG.time = False, None, None


def install_signal_handler(sig: signal.Signals) -> None:
    """Make `sig` set the flag. Must run in the main thread (a Python rule for signal handlers)."""

    def _handler(signum: int, _frame: FrameType | None) -> None:
        request_stop(f"signal:{signal.Signals(signum).name}")

    # The launcher hands the signal down as SIG_IGN so a worker is never killed by it before this point.
    signal.signal(sig, _handler)
    _FLAG.signal_installed = True


def start_file_watcher(path: Path, interval_s: float = POLL_INTERVAL_S) -> threading.Thread:
    """Poll `path` on a daemon thread and set the flag when it appears (a file that exists already counts)."""

    def _watch() -> None:
        while not _FLAG.requested:
            if path.exists():
                request_stop(f"file:{path}")
                return
            time.sleep(interval_s)

    thread = threading.Thread(target=_watch, name="ddpctl-stop-file", daemon=True)
    thread.start()
    _FLAG.watcher = thread
    return thread


def watch_from_env(env: Mapping[str, str]) -> None:
    """Install the signal handler and the file watcher named by the launcher's variables, each at most once.

    Called by `ddpctl.node.worker` before the script runs and again by `ddpctl.runtime.init`, so a script started
    without the wrapper still reacts. Absent variables mean "not under ddpctl launch": nothing is installed.
    """
    sig_name = env.get(envvars.STOP_SIGNAL, "")
    if sig_name and not _FLAG.signal_installed and threading.current_thread() is threading.main_thread():
        try:
            install_signal_handler(signal_named(sig_name))
        except (KeyError, ValueError):
            # Training must not die on a typo here: the stop file still works, so warn and carry on.
            print(f"ddpctl: WARNING: {envvars.STOP_SIGNAL}={sig_name!r} is not a signal; ignored", file=sys.stderr)
    stop_file = env.get(envvars.STOP_FILE, "")
    if stop_file and _FLAG.watcher is None:
        start_file_watcher(Path(stop_file))


def announce_listener(how: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Record that this rank listens for stops (attempt-<n>/listen-rank-<r>.json), so ddpctl can tell a stop
    that nobody will act on from one in progress. Without the launcher's variables nothing is written."""
    env = os.environ if env is None else env
    run_dir = env.get(envvars.RUN_DIR, "")
    if not run_dir:
        return None
    from ddpctl.run.layout import RunLayout

    rank = int(env.get("RANK", "0") or 0)
    target = RunLayout(Path(run_dir)).listen_marker(int(env.get(envvars.ATTEMPT, "0") or 0), rank)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        safeio.write_json_atomic(target, {"rank": rank, "how": how, "time": time.time()})
    except OSError as exc:  # an announcement must never stop training
        print(f"ddpctl: WARNING: cannot record that rank {rank} listens for stops: {exc}", file=sys.stderr)
        return None
    return target
