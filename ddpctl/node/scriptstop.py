"""Stops for scripts that checkpoint themselves (`requeue.script_signal`), inside the worker wrapper.

ddpctl still does the fan-out (stop file + signal to every node), the budgets and the requeue; such a script only
needs to save and exit 0 when it gets the signal it chose. The launcher makes torchrun and the workers inherit
the stop signal as ignored (so torchrun survives it), so the chosen signal is delivered here, explicitly: once this
rank's stop flag is set (stop file or stop signal), the wrapper sends the signal to its own main thread, where the
script's handler runs, or the signal's default action when the script set none (as under plain Slurm).

A script may instead poll `$DDPCTL_STOP_FILE` (no signal needed): once it exists, save, delete it (that is the
acknowledgement), exit 0. After the script returns with status 0 following an acknowledged stop, rank 0 writes the
same stopped marker the runtime writes after an agreed stop, naming the newest file of the checkpoint directory:
the batch shell then requeues.
Torch-free.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.proc import signal_named
from ddpctl.run import envvars, history
from ddpctl.run.history import Stopped
from ddpctl.run.layout import RunLayout
from ddpctl.runtime import stopflag

POLL_S = 0.05
# Set just before the signal goes to a handler the script installed: only then is a clean exit the script's own
# stop (a script that merely finished its training during the stop's lead time has completed, not stopped).
_DELIVERED = {"to_handler": False}
MAX_LISTED = 10_000  # bounded work on a checkpoint directory of any size


def script_signal(env: Mapping[str, str]) -> signal.Signals | None:
    name = env.get(envvars.SCRIPT_SIGNAL, "")
    if not name:
        return None
    try:
        return signal_named(name)
    except (KeyError, ValueError):
        print(f"ddpctl: WARNING: {envvars.SCRIPT_SIGNAL}={name!r} is not a signal; not forwarded", file=sys.stderr)
        return None


def arm(env: Mapping[str, str]) -> signal.Signals | None:
    """Main thread, before the script runs: give the script the signal's default disposition (it may have been
    inherited as ignored, or taken by the stop-flag handler), and start the forwarder."""
    sig = script_signal(env)
    if sig is None:
        return None
    signal.signal(sig, signal.SIG_DFL)
    main = threading.main_thread().ident
    thread = threading.Thread(target=_forward, args=(sig, main, env), name="ddpctl-script-signal", daemon=True)
    thread.start()
    return sig


def _forward(sig: signal.Signals, main: int | None, env: Mapping[str, str]) -> None:
    while not stopflag.stop_requested():
        time.sleep(POLL_S)
    # A script still importing torch has not installed its handler yet: give it part of the lead time to do so
    # before the default action (usually death) applies.
    deadline = time.monotonic() + handler_grace_s(env)
    while not callable(signal.getsignal(sig)) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    handler = signal.getsignal(sig)
    how = "its own handler" if callable(handler) else "no handler (the default action applies)"
    if callable(handler):
        stopflag.announce_listener(f"script handler for {sig.name}", env)
        _DELIVERED["to_handler"] = True
    print(f"[ddpctl.worker] stop requested: sending {sig.name} to the script ({how})", flush=True)
    if main is not None:
        # To the main thread, where Python runs handlers; a process-wide kill could land on this thread.
        signal.pthread_kill(main, sig)


def handler_grace_s(env: Mapping[str, str]) -> float:
    """A quarter of the lead time, at most 30 s: the rest is for the script's save."""
    try:
        lead = float(env.get(envvars.STOP_LEAD_S, "") or 120)
    except ValueError:
        lead = 120.0
    return min(30.0, lead / 4)


def newest_checkpoint(directory: Path) -> dict[str, Any] | None:
    """The most recently modified entry of the checkpoint directory: its path and modification time."""
    best: tuple[float, Path] | None = None
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_LISTED:
                    break
                if entry.name.startswith("."):
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime
                if best is None or mtime > best[0]:
                    best = (mtime, Path(entry.path))
    except OSError:
        return None
    return None if best is None else {"path": str(best[1]), "mtime": round(best[0], 3)}


def file_acknowledged(env: Mapping[str, str]) -> bool:
    """A script that polls $DDPCTL_STOP_FILE acknowledges a stop by deleting that file once it has saved."""
    stop_file = env.get(envvars.STOP_FILE, "")
    source = stopflag.stop_source() or ""
    return bool(stop_file) and source == f"file:{stop_file}" and not Path(stop_file).exists()


def peer_handler_got_it(layout: RunLayout, attempt: int, env: Mapping[str, str]) -> float | None:
    """Some rank's own handler got the script signal in this attempt (its listen-rank file says so). A DDP
    script stops on every rank once any rank's handler has the signal, so rank 0 can save and leave before its
    own forwarder, polling every POLL_S behind a stop-file watcher, got round to sending it. Returns when the
    first such handler was told (None: no rank's was)."""
    sig = script_signal(env)
    if sig is None:
        return None
    want = f"script handler for {sig.name}"
    try:
        world = min(max(int(env.get("WORLD_SIZE", "1") or 1), 1), MAX_LISTED)
    except ValueError:
        world = 1
    told: list[float] = []
    for rank in range(world):
        try:
            info = json.loads(safeio.read_text(layout.listen_marker(attempt, rank)))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and info.get("how") == want and isinstance(info.get("time"), (int, float)):
            told.append(float(info["time"]))
    return min(told, default=None)


def after_script(status: int, env: Mapping[str, str]) -> dict[str, Any] | None:
    """Rank 0: a clean exit after the script's own handler got the signal (on this rank or, the script being one
    program, on any rank), or after it deleted the stop file it polls, is its stop for requeue."""
    run_dir = env.get(envvars.RUN_DIR, "")
    if status != 0 or not run_dir or env.get("RANK", "0") != "0":
        return None
    layout = RunLayout(Path(run_dir))
    attempt = int(env.get(envvars.ATTEMPT, "0") or 0)
    peer_told = peer_handler_got_it(layout, attempt, env)
    if not (_DELIVERED["to_handler"] or file_acknowledged(env) or peer_told is not None):
        return None
    marker = layout.stopped_marker(attempt)
    if marker.exists():  # the script also used ddpctl.runtime, which recorded the agreed stop itself
        return None
    newest = newest_checkpoint(Path(env.get(envvars.CKPT_DIR, "") or layout.default_checkpoints))
    record = {
        "step": None,
        "checkpoint": newest["path"] if newest else None,
        "checkpoint_mtime": newest["mtime"] if newest else None,
        # The request's moment is the first any rank saw of it: rank 0's own watcher may notice the stop file
        # only after a peer's handler made the whole script agree, save and leave.
        "signal_time": min((t for t in (stopflag.stop_time(), peer_told) if t is not None), default=None),
        "source": "script",
        "attempt": attempt,
        "time": time.time(),
    }
    safeio.write_json_atomic(marker, record)
    history.append(layout.events, Stopped.from_marker(record))
    saved = f"newest checkpoint {newest['path']}" if newest else "no file in the checkpoint directory"
    print(f"[ddpctl.worker] the script stopped itself after the stop request ({saved}); the job requeues", flush=True)
    return record
