"""`python -m ddpctl.node.worker SCRIPT [ARGS...]`: the per-rank entry point torchrun starts under `ddpctl launch`.

It gives every rank a stable, appended log file (`$DDPCTL_RANK_LOG_PATTERN` with `{rank}` filled in), arms the
stop flag (signal handler + stop-file watcher) before any user code runs, then runs SCRIPT exactly like
`python SCRIPT ARGS...` would. Torch is not imported here: the script decides when to pay for it.
Without the ddpctl variables it degrades to a plain `python SCRIPT` (no redirection, no watcher).
"""

from __future__ import annotations

import atexit
import faulthandler
import json
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from ddpctl import exitcodes, safeio
from ddpctl.health import DUMP_SIGNAL
from ddpctl.node import nogroup, scriptstop, stamper
from ddpctl.run import envvars
from ddpctl.run.layout import fill_rank, rank_info_of
from ddpctl.runtime import stopflag

ERROR_MAX = 500  # of the exception line a rank-exit event keeps
USAGE_LINE = "usage: python -m ddpctl.node.worker SCRIPT [ARGS...]"


_stamper_done: list[int] = []  # the stamper's done pipe, for exit_now: main() returns only a status
_last_error: list[str] = []  # the script's exception, as its traceback's last line (for `record_exit`)


def redirect_output(env: Mapping[str, str]) -> Path | None:
    """Point fds 1 and 2 at this rank's log (through the stamper, which records when each line was written),
    opened for append so a requeued attempt never truncates it."""
    pattern = env.get(envvars.RANK_LOG, "")
    if not pattern:
        return None
    path = fill_rank(pattern, env.get("RANK", "0"))
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # A symlinked rank log is refused (ELOOP), never appended through. fds 1 and 2 themselves are redirected
    # rather than sys.stdout reassigned, so C/C++ output (gloo, NCCL, faulthandler) lands there too.
    _stamper_done.append(stamper.start(path))
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    return path


def record_placement(log: Path, env: Mapping[str, str]) -> None:
    """rank-<R>.json beside the log: which node this rank runs on. Only the worker knows: with c10d rendezvous
    torchrun orders nodes by address, not by SLURM_NODEID, so the launcher cannot tell which ranks it got."""
    info = {
        "rank": int(env.get("RANK", "0")),
        "local_rank": int(env.get("LOCAL_RANK", "0")),
        "group_rank": int(env.get("GROUP_RANK", "0")),
        "node": env.get(envvars.NODE_NAME, "?"),
        # For the hang watchdog: whom to signal for a stack dump, and which thread in it is the main one.
        "pid": os.getpid(),
        "main_thread": threading.main_thread().ident,
    }
    target = rank_info_of(log)
    safeio.write_text_atomic(target, json.dumps(info) + "\n")


def record_exit(env: Mapping[str, str], status: int) -> None:
    """A `rank-exit` event: this rank's own failure, so the decision tells a script's error from the collateral
    errors of the ranks that survived a dead peer (`ddpctl.node.blame`). Never fails the worker."""
    from ddpctl.node.torchreport import is_collateral
    from ddpctl.run import history
    from ddpctl.run.history import RankExited
    from ddpctl.run.layout import RunLayout

    error = _last_error[-1][:ERROR_MAX] if _last_error else ""
    try:
        history.append(
            RunLayout(Path(env[envvars.RUN_DIR])).events,
            RankExited(
                attempt=int(env.get(envvars.ATTEMPT, "0")),
                rank=int(env.get("RANK", "0")),
                node=env.get(envvars.NODE_NAME),
                status=status,
                error=error,
                collateral=is_collateral(error),
            ),
        )
    except (OSError, KeyError, ValueError) as err:
        print(f"ddpctl.worker: exit not recorded: {err}", file=sys.stderr, flush=True)


def run_script(script: str, args: Sequence[str]) -> int:
    """Run SCRIPT as __main__ with `python SCRIPT` semantics; return its exit status."""
    path = Path(script)
    if not path.is_file():
        print(f"ddpctl.worker: script not found: {script}", file=sys.stderr)
        return exitcodes.USAGE
    sys.argv = [script, *args]
    # `python script.py` puts the script's directory first on sys.path. The launcher starts this wrapper without
    # the cwd there (`-P`, or proc's `-c` boot); a plain `python -m ddpctl.node.worker` put the cwd first.
    if sys.orig_argv[1:2] not in (["-P"], ["-c"]):
        sys.path[0] = str(path.resolve().parent)
    else:
        sys.path.insert(0, str(path.resolve().parent))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        return _exit_status(exc.code)
    except BaseException as exc:  # a worker reports every failure as a status (and a traceback), never hangs
        traceback.print_exc()
        _last_error.append(traceback.format_exception_only(exc)[-1].strip())
        return exitcodes.FAILURE
    return exitcodes.OK


def _exit_status(code: object) -> int:
    # Mirror the interpreter: None -> 0, int -> itself, anything else is printed and means 1.
    if code is None:
        return exitcodes.OK
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    # `sys.exit("fatal: ...")` is the script's own error message: the rank-exit event carries it as it would an
    # exception's line (else `logs --errors` and the decision knew only "exit status 1").
    text = str(code).strip()
    _last_error.append(f"SystemExit: {text.splitlines()[-1]}" if text else "SystemExit")
    return exitcodes.FAILURE


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE_LINE, file=sys.stderr)
        return exitcodes.USAGE if not argv else exitcodes.OK
    try:
        log = redirect_output(env)
    except OSError as err:  # e.g. a symlink planted where this rank's log goes: refused, never followed
        print(f"ddpctl.worker: cannot open this rank's log: {safeio.describe(err)}", file=sys.stderr, flush=True)
        return exitcodes.USAGE
    if log is not None:
        # Before the placement file says whom to signal: the watchdog's dump signal must never find it unarmed
        # (a real-time signal's default action kills). chain=False: nothing else should see it.
        faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True, chain=False)
        record_placement(log, env)
        print(
            f"[ddpctl.worker] rank={env.get('RANK', '0')} attempt={env.get(envvars.ATTEMPT, '0')} "
            f"node={env.get(envvars.NODE_NAME, '?')} pid={os.getpid()} script={argv[0]}",
            flush=True,
        )
    stopflag.watch_from_env(env)
    scriptstop.arm(env)  # requeue.script_signal: after the stop flag's handler, so the script's signal wins
    status = run_script(argv[0], argv[1:])
    scriptstop.after_script(status, env)
    if log is not None:
        nogroup.record(rank_info_of(log))  # did this rank join a process group? (a completion's warning)
    if log is not None and status != exitcodes.OK:
        record_exit(env, status)
    sys.stdout.flush()
    sys.stderr.flush()
    return status


def exit_now(status: int) -> None:
    """Finish like a normal exit (threads joined, atexit handlers run, output flushed), then leave with
    os._exit: Gloo's worker threads can abort the process (SIGABRT, "terminate called without an active
    exception") while the interpreter is torn down, even after destroy_process_group (pytorch#179291,
    pytorch#190489). A clean stop must never be reported to torchrun as a crash.
    """
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    for done in _stamper_done:  # the last lines are in the log (and timed) before torchrun sees the exit
        stamper.wait_done(done)
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
