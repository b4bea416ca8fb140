"""The only module that starts external commands (argv lists only, never a shell string), and the one place a
signal name becomes a signal.

`run`/`check` wait for a command and capture its output; `spawn` starts a long-lived child (the local
backend's supervisor and launchers, torchrun) that the caller waits on itself; `fork_call` runs a Python
function as such a child without a new interpreter (torchrun's `main()` in a fork of the launcher). Code that needs
sbatch/squeue/scontrol takes a `Runner` so tests can inject their own at this seam.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TypeVar

from ddpctl.errors import CommandError

T = TypeVar("T")


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], Completed]


def run(argv: Sequence[str], *, timeout: float | None = 60.0, env: Mapping[str, str] | None = None) -> Completed:
    """Run argv and capture its output; a missing program becomes a CommandError naming it."""
    if shutil.which(argv[0], path=(env or {}).get("PATH")) is None:
        raise CommandError(f"command not found: {argv[0]!r} (is it installed and on PATH?)")
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env else None,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandError(f"{argv[0]} did not answer within {timeout} s: {' '.join(argv)}") from exc
    return Completed(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


def check(argv: Sequence[str], runner: Runner = run) -> Completed:
    """Like run, but a non-zero exit becomes a CommandError carrying the command's own message."""
    done = runner(argv)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        detail = message[-1] if message else f"exit status {done.returncode}"
        raise CommandError(f"{argv[0]} failed: {detail}")
    return done


def concurrently(*calls: Callable[[], T]) -> list[T]:
    """Each call in a thread of its own, so that commands waiting on a busy controller overlap; their results
    in order. The exception of the first call (in order) that raised one is raised, after all have ended."""
    results: list[T | None] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def work(index: int) -> None:
        try:
            results[index] = calls[index]()
        except BaseException as exc:
            errors[index] = exc

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(1, len(calls))]
    for thread in threads:
        thread.start()
    if calls:
        work(0)
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results  # type: ignore[return-value]  # every slot was filled: none raised


def available(program: str) -> bool:
    return shutil.which(program) is not None


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
    stdin: int | None = None,
    new_session: bool = False,
    preexec_fn: Callable[[], object] | None = None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start argv without waiting for it (the caller waits, signals and reaps it). `pass_fds`: descriptors the
    child inherits (the local backend's supervisor lock)."""
    return subprocess.Popen(
        list(argv),
        env=dict(env) if env is not None else None,
        stdout=stdout,
        stderr=stderr,
        stdin=stdin,
        start_new_session=new_session,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - callers are single-threaded
        pass_fds=tuple(pass_fds),
    )


class Forked:
    """A child started by `fork_call`, polled, signalled and reaped like a Popen (`returncode` < 0: killed by
    that signal)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)


def fork_call(
    main: Callable[[], int], *, env: Mapping[str, str], output_fd: int, prepare: Callable[[], object]
) -> Forked:
    """Run `main()` in a forked copy of this process, as if it were the main program of a new one: its output
    on `output_fd`, `env` as its whole environment, `prepare()` first (signal dispositions), and its result,
    an uncaught exception (traceback, 1) or SystemExit as its exit status. It saves the child an interpreter
    start and the imports this process already made. The caller must be single-threaded (fork copies only the
    calling thread) and must not change anything a process reads only as it starts (`torchrun.in_process_args`
    decides that for torchrun)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return Forked(pid)
    code = 1
    try:
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.closerange(3, MAX_INHERITED_FD)  # as Popen's close_fds: the child holds none of the parent's files
        _fresh_std_streams()
        os.environ.clear()
        os.environ.update(env)
        prepare()
        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    except BaseException:
        traceback.print_exc()
    finally:
        _flush_at_exit()
        os._exit(code)


def _fresh_std_streams() -> None:
    """sys.stdout/stderr as a new interpreter has them, on fds 1 and 2 (the parent's may be anything: a test
    harness's capture, a buffer holding the parent's unwritten output)."""
    out = open(1, "w", closefd=False, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
    err = open(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
    sys.stdout = sys.__stdout__ = out  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = err  # type: ignore[misc]


def _flush_at_exit() -> None:
    """What a normal interpreter exit would flush (os._exit skips it)."""
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


MAX_INHERITED_FD = 65536
Popen = subprocess.Popen[bytes]
STDOUT = subprocess.STDOUT
DEVNULL = subprocess.DEVNULL


def signal_named(name: str) -> signal.Signals:
    """Accept "USR2", "SIGUSR2", "usr2" or "12", the way Slurm's `--signal` does."""
    text = name.strip().upper()
    if text.isdigit():
        return signal.Signals(int(text))
    return signal.Signals[text if text.startswith("SIG") else "SIG" + text]
