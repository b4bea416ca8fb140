"""Record when each line of a rank's log was written, without changing the log itself.

The worker's stdout and stderr become a pipe. A forked copy of the worker, made before any user code or thread
exists (the stamper), reads the pipe, appends what it read to the rank log unchanged and then one record to the
log's `.times` sidecar (`ddpctl.run.logtimes`): the log's size after the write and the time of the read. So
`ddpctl logs` can merge ranks in the order their lines were written, and show the times (`--timestamps`).

The stamper is a grandchild that the worker does not wait for (a script's own `os.wait()` can never reap it);
it ignores every signal a stop, Ctrl-C or torchrun's SIGTERM to the process group sends, because it must
outlive the worker to save its last words, and it ends when the last writer (the worker and any child that
inherited its output) closes the pipe. `wait_done` lets a worker that exits normally wait until its output is
in the file, through a pipe only the stamper holds open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import time
from pathlib import Path

from ddpctl import proc, safeio
from ddpctl.run import logtimes

READ_SIZE = 1 << 16
PIPE_SIZE = 1 << 20  # room for a burst of output while the stamper is not scheduled
_KEEP_SIGNALS = {signal.SIGCHLD, signal.SIGKILL, signal.SIGSTOP}


def start(log: Path) -> int:
    """Point fds 1 and 2 at a pipe whose stamper appends to `log`; return the read end of the done pipe.

    Opens the log (and its sidecar) first, so a symlinked log is refused (OSError) before anything forks.
    """
    log_fd = safeio.open_append(log)
    try:
        times_fd = safeio.open_append(logtimes.times_of(log))
    except OSError:
        os.close(log_fd)
        raise
    read_fd, write_fd = os.pipe()
    done_read, done_write = os.pipe()
    with contextlib.suppress(OSError, AttributeError):  # Linux only; the default 64 KiB works too
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    proc.fork_detached(lambda: _serve_detached(read_fd, log_fd, times_fd), close_fds=(write_fd, done_read))
    os.close(read_fd)
    os.close(log_fd)
    os.close(times_fd)
    os.close(done_write)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    return done_read


def _serve_detached(read_fd: int, log_fd: int, times_fd: int) -> None:  # pragma: no cover - forked child
    # Hold none of the worker's own streams: whoever reads them (torchrun, a test) sees their end when the
    # worker ends, not when the stamper does.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for sig in signal.valid_signals():
        if sig not in _KEEP_SIGNALS:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, signal.SIG_IGN)
    serve(read_fd, log_fd, times_fd)


# The one line left out of rank logs: torch's DDP reducer prints this advice from C++ (fd 2, so no Python filter
# reaches it) on every rank in every attempt when find_unused_parameters=True, which the README recommends because
# it keeps the gradient bucket order fixed across a resume; it then filled `top`'s "last log line". README, Logs.
DROPPED = b"find_unused_parameters=True was specified in DDP constructor"


def drop_advice(data: bytes, at_line_start: bool) -> bytes:
    """`data` without its whole lines that hold DROPPED (pure). A line cut across two reads is kept whole: only
    a line that begins and ends in this read (or begins it, `at_line_start`) can be left out."""
    if DROPPED not in data:
        return data
    lines = data.splitlines(keepends=True)
    return b"".join(
        line
        for index, line in enumerate(lines)
        if DROPPED not in line or not line.endswith(b"\n") or (index == 0 and not at_line_start)
    )


def serve(read_fd: int, log_fd: int, times_fd: int) -> None:
    """Copy the pipe into the log until every writer closed it, recording each read's time and end offset."""
    at_line_start = True
    while read := os.read(read_fd, READ_SIZE):
        when = time.time()
        data, at_line_start = drop_advice(read, at_line_start), read.endswith(b"\n")
        if not data:
            continue
        try:
            _write_all(log_fd, data)
            end = os.lseek(log_fd, 0, os.SEEK_CUR)  # O_APPEND: the file's end after this write
            _write_all(times_fd, logtimes.record(end, when))
        except OSError:
            continue  # disk full or the like: keep draining, or the rank would block on a full pipe


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def wait_done(done_fd: int, limit_s: float = 2.0) -> None:
    """Close our ends of the output pipe and wait (at most `limit_s`) until the stamper has written everything.

    It may wait longer than the worker lives when a child process still holds the output: hence the limit.
    """
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(OSError, ValueError):
        select.select([done_fd], [], [], limit_s)
