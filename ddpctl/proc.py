"""The only module that starts external commands (argv lists only, never a shell string), and the one place a
signal name becomes a signal.

`run`/`check` wait for a command and capture its output; `spawn` starts a long-lived child (the local
backend's supervisor and launchers, torchrun) that the caller waits on itself. Code that needs
sbatch/squeue/scontrol takes a `Runner` so tests can inject their own at this seam.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Generic, TypeVar

from ddpctl.errors import CommandError, CommandTimeout

T = TypeVar("T")


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], Completed]


def run(
    argv: Sequence[str],
    *,
    timeout: float | None = 60.0,
    env: Mapping[str, str] | None = None,
    errors: str = "strict",
) -> Completed:
    """Run argv and capture its output; a missing program becomes a CommandError naming it. `errors` is the
    decoding's: "surrogateescape" keeps bytes that are not UTF-8 (file names) as the str the os module takes."""
    if shutil.which(argv[0], path=(env or {}).get("PATH")) is None:
        raise CommandError(f"command not found: {argv[0]!r} (is it installed and on PATH?)")
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors=errors,
            timeout=timeout,
            env=dict(env) if env else None,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandTimeout(f"{argv[0]} did not answer within {timeout:g} s: {' '.join(argv)}") from exc
    return Completed(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


class OutputTooBig(CommandError):
    """A command said more than the caller reads (`run_capped`)."""


def run_capped(argv: Sequence[str], *, limit: int, data: bytes | None = None, timeout: float = 60.0) -> Completed:
    """`run`, with `data` on its standard input (bytes: objects sent over ssh), holding at most `limit` bytes of
    each output: a command that says more is killed and OutputTooBig raised, so an answer from elsewhere (a
    cluster's) is bounded before it is read, not after. Output is decoded with bytes that are not UTF-8 replaced."""
    if shutil.which(argv[0]) is None:
        raise CommandError(f"command not found: {argv[0]!r} (is it installed and on PATH?)")
    stdin = subprocess.PIPE if data is not None else None
    child = subprocess.Popen(list(argv), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    outs, over = (bytearray(), bytearray()), threading.Event()

    def pump(stream: IO[bytes], buf: bytearray) -> None:
        while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]  # a BufferedReader
            if len(buf) + len(chunk) > limit:
                over.set()
                child.kill()
                return
            buf += chunk

    threads = [
        threading.Thread(target=pump, args=(s, b), daemon=True)
        for s, b in zip((child.stdout, child.stderr), outs, strict=True)
    ]
    if data is not None:
        threads.append(threading.Thread(target=_feed, args=(child.stdin, data), daemon=True))
    for thread in threads:
        thread.start()
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired as exc:
        child.kill()
        child.wait()
        raise CommandTimeout(f"{argv[0]} did not answer within {timeout:g} s: {' '.join(argv)}") from exc
    for thread in threads:
        thread.join(timeout)
    if over.is_set():
        raise OutputTooBig(f"{argv[0]} said more than {limit} bytes; it was stopped and not read further")
    return Completed(tuple(argv), child.returncode, outs[0].decode(errors="replace"), outs[1].decode(errors="replace"))


@dataclass(frozen=True)
class Bounded:
    returncode: int | None  # None: it outlived its timeout and its process group was killed
    tail: bytes  # the last bytes it said (stdout and stderr together), at most `keep`
    dropped: int  # bytes it said before those, not kept


def run_bounded(argv: Sequence[str], *, keep: int, timeout: float) -> Bounded:
    """Run argv in a session of its own, stdout and stderr together, keeping only the last `keep` bytes of what
    it says: a chatty command costs bounded memory, not a failure. At `timeout` its whole process group is
    killed (a shell's children with it) and what it said so far is still returned. Output a child left running
    in the background still writes is waited for one second at most."""
    if shutil.which(argv[0]) is None:
        raise CommandError(f"command not found: {argv[0]!r} (is it installed and on PATH?)")
    child = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    tail, dropped = bytearray(), [0]

    def pump(stream: IO[bytes]) -> None:
        while chunk := stream.read1(1 << 16):  # type: ignore[attr-defined]  # a BufferedReader
            tail.extend(chunk)
            if len(tail) > keep:
                dropped[0] += len(tail) - keep
                del tail[: len(tail) - keep]

    thread = threading.Thread(target=pump, args=(child.stdout,), daemon=True)
    thread.start()
    code: int | None
    try:
        code = child.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        code = None
    thread.join(1.0)
    return Bounded(code, bytes(tail), dropped[0])


def _feed(stream: IO[bytes], data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except OSError:  # the command ended (or was stopped) without reading it all
        pass


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


class Pending(Generic[T]):
    """A call running in a thread of its own (`in_background`); `result()` waits for it and returns its value
    or raises its exception. Daemonic: a caller that fails first and exits does not wait for it."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, args=(call,), daemon=True)
        self._thread.start()

    def _work(self, call: Callable[[], T]) -> None:
        try:
            self._value = call()
        except BaseException as exc:
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set: the call returned


def in_background(call: Callable[[], T]) -> Pending[T]:
    """Start `call` now, beside the caller's own work (e.g. controller round trips beside imports)."""
    return Pending(call)


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


Reading = subprocess.Popen[bytes]  # a started command whose output is read as it comes


def spawn_reading(argv: Sequence[str]) -> Reading:
    """Start argv with its stdout and stderr as pipes the caller reads as they come (a remote `logs -f`)."""
    if shutil.which(argv[0]) is None:
        raise CommandError(f"command not found: {argv[0]!r} (is it installed and on PATH?)")
    return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def fork_detached(child: Callable[[], None], close_fds: Sequence[int] = ()) -> None:
    """Run `child` in a forked copy of this process that is nobody's child (fork twice; the middle process
    leaves at once and is reaped here), so the caller's own `os.wait()` can never reap it. The copy closes
    `close_fds` first and leaves through os._exit (status 1 if `child` raised), never back into our code.
    Only for a process with no threads yet (the worker wrapper before the script starts)."""
    middle = os.fork()
    if middle == 0:  # pragma: no cover - runs in the forked children
        status = 0
        try:
            for fd in close_fds:
                os.close(fd)
            if os.fork() == 0:
                child()
        except BaseException:  # a forked child must never return into the caller's code
            status = 1
        os._exit(status)
    os.waitpid(middle, 0)


Popen = subprocess.Popen[bytes]
STDOUT = subprocess.STDOUT
DEVNULL = subprocess.DEVNULL


def wait_bounded(started: Popen, timeout_s: float) -> int | None:
    """Wait up to `timeout_s` for a started command; its exit status, or None while it still runs."""
    try:
        return started.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def signal_named(name: str) -> signal.Signals:
    """Accept "USR2", "SIGUSR2", "usr2" or "12", the way Slurm's `--signal` does."""
    text = name.strip().upper()
    if text.isdigit():
        return signal.Signals(int(text))
    return signal.Signals[text if text.startswith("SIG") else "SIG" + text]
