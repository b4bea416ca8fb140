"""Knowing, not guessing, whether a local job's supervisor is alive — and taking its nodes down when it dies.

A pid alone is not an identity: after the supervisor ends, the pid can belong to any process. So:
- `supervisor.lock` in the run dir is flock'ed by `submit` before the supervisor exists and handed to it (and
  by it to each node's launcher): the job is running exactly while someone in its process tree holds the lock.
  The kernel drops the lock when the last holder exits, however it exits (kill -9 included).
- `supervisor.pid` holds the pid *and* its start time (field 22 of /proc/PID/stat); a process is signalled
  only while both match and the lock is held.
- Launchers get PR_SET_PDEATHSIG=SIGTERM: if the supervisor is killed, they stop their torchrun and workers
  (SIGTERM is forwarded), so no orphan keeps training with nobody to decide about it.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from ddpctl import proc, pyargv, safeio
from ddpctl.run.layout import RunLayout

_PR_SET_PDEATHSIG = 1


def process_start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid` in clock ticks since boot (None: no such process, or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22 overall; fields[0] is field 3 (the state)


def take_lock(run_dir: Path) -> int:
    """Create and lock the run's supervisor lock; return the fd to hand to the supervisor (inheritable)."""
    fd = safeio.open_fd(RunLayout(run_dir).supervisor_lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.set_inheritable(fd, True)
    return fd


def lock_held(run_dir: Path) -> bool:
    """True while the job's supervisor (or one of its launchers) is alive."""
    try:
        fd = safeio.open_read(RunLayout(run_dir).supervisor_lock)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)
    return False


def write_pid(run_dir: Path, pid: int) -> None:
    started = process_start_ticks(pid)
    safeio.write_text_atomic(RunLayout(run_dir).supervisor_pid, f"{pid} {started}\n")


def spawn_holding_lock(run_dir: Path, log: Path, words: list[str]) -> int:
    """Start `python -m ddpctl internal WORDS...` detached (its own session, output appended to `log`) with
    `run_dir`'s lock taken here and handed over (`--lock-fd`), so nothing ever sees a gap before its start-up;
    its pid, also written to `run_dir`. The local backend's supervisor and a local sweep's queue start so."""
    lock = take_lock(run_dir)
    try:
        with safeio.open_append_file(log) as out:
            child = proc.spawn(
                [*pyargv.python_module(sys.executable, "ddpctl"), "internal", *words, "--lock-fd", str(lock)],
                stdout=out,
                stderr=proc.STDOUT,
                stdin=proc.DEVNULL,
                new_session=True,
                pass_fds=(lock,),
            )
        write_pid(run_dir, child.pid)
    finally:
        os.close(lock)
    return child.pid


def supervisor(run_dir: Path) -> int | None:
    """The supervisor's pid if that very process (same pid, same start time) is alive and holds the lock."""
    try:
        pid_text, started = safeio.read_text(RunLayout(run_dir).supervisor_pid).split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if str(process_start_ticks(pid)) != started or not lock_held(run_dir):
        return None
    return pid


def signal_supervisor(run_dir: Path, signum: int) -> bool:
    """Send `signum` to the verified supervisor; False when there is none to send it to."""
    pid = supervisor(run_dir)
    if pid is None:
        return False
    os.kill(pid, signum)
    return True


def die_with_parent() -> None:
    """preexec_fn for a launcher: SIGTERM when the supervisor dies (and exit now if it already did)."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the supervisor died between fork and prctl
        os._exit(128 + signal.SIGTERM)


def launcher_preexec(stop: signal.Signals) -> Callable[[], None]:
    """preexec_fn for a launcher: dies with the supervisor, and starts with the stop signal ignored."""

    def preexec() -> None:
        die_with_parent()
        signal.signal(stop, signal.SIG_IGN)

    return preexec


def free_loopback_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 right now (the kernel's choice): each local attempt's
    rendezvous gets its own, so concurrent local jobs, whatever registry counted their numbers, never meet."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def next_job_number(home: Path, at_least: int = 0) -> int:
    home.mkdir(parents=True, exist_ok=True)
    with (home / "local-counter").open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        current = max(int(handle.read().strip() or 0) + 1, at_least)
        handle.seek(0)
        handle.truncate()
        handle.write(str(current))
    return current


def start_supervisor(root: Path, batch_log: Path, number: int) -> int:
    """Start the detached `internal local-run` supervisor of run `root`; its pid (also written to the run dir).

    The run's lock is taken before and handed over to it, so `status` never sees a gap before its start-up."""
    return spawn_holding_lock(root, batch_log, ["local-run", str(root), "--job-number", str(number)])
