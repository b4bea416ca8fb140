"""Opening and writing files the safe way, in one place.

- Run-dir files are opened with O_NOFOLLOW: a run dir may be shared or writable by a job's own code, and a
  symlink planted there (`rank-7.log -> /etc/shadow`) must not make `ddpctl logs` print, or a worker append
  to, a file outside the run. A symlinked final component fails with ELOOP, reported as such.
- Files ddpctl creates get mode 0o666 filtered by the umask, like any tool's output: nothing it writes needs the
  exec bit (sbatch reads the batch script), and a script holding the spec's env values must not be made
  world-readable behind a umask of 077.
- `write_atomic` (and `write_text_atomic`) writes a temp file beside the target and renames it; on any failure
  the temp file is removed and the error names the target. `durable=True` adds the fsyncs a checkpoint needs.
- Every module of ddpctl opens with O_NOFOLLOW and writes atomically through here (tests/test_architecture.py
  checks it), so the rules above are kept in one place; it imports nothing of ddpctl, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

# In temp names (write_atomic). os.uname, not socket.gethostname (the same name on POSIX): importing socket costs
# every command ~3 ms at start-up, `ddpctl render` among them (tests/cli/test_cli_imports.py).
HOST = "".join(c for c in os.uname().nodename if c.isalnum() or c in "._-")[:64]

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def open_fd(path: Path | str, flags: int, mode: int = 0o666) -> int:
    """os.open without following a symlink at the last component (raises OSError ELOOP for one)."""
    return os.open(path, flags | NOFOLLOW, mode)


def open_read(path: Path | str) -> int:
    return open_fd(path, os.O_RDONLY)


def open_append(path: Path | str, mode: int = 0o666) -> int:
    """Open for appending, creating it if needed; never truncates, never follows a symlink."""
    return open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)


def read_bytes(path: Path | str) -> bytes:
    fd = open_read(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def read_tail(path: Path | str, limit: int, count_limit: int = 1 << 28) -> tuple[str, int | None]:
    """The last `limit` bytes of a file (from a line start), decoded leniently, and how many lines come before
    them (None when that would mean counting more than `count_limit` bytes)."""
    fd = open_read(path)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        data = os.pread(fd, limit, start)
        if start and b"\n" in data:
            cut = data.index(b"\n") + 1
            data, start = data[cut:], start + cut
        before: int | None = 0
        if start > count_limit:
            before = None
        else:
            for offset in range(0, start, 1 << 22):
                before = (before or 0) + os.pread(fd, min(1 << 22, start - offset), offset).count(b"\n")
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace"), before


def read_text(path: Path | str) -> str:
    return read_bytes(path).decode("utf-8", errors="replace")


def touch(path: Path | str) -> None:
    """Create `path` if missing (a flag file); a planted symlink is refused, not used to create its target."""
    os.close(open_fd(path, os.O_WRONLY | os.O_CREAT))


def open_append_file(path: Path | str) -> BinaryIO:
    """A binary file object appending to `path` (for a child's stdout), opened without following a symlink."""
    return os.fdopen(open_append(path), "ab")


def describe(err: OSError) -> str:
    """An OSError as a person reads it: 'PATH: a symbolic link (refused)' rather than 'Errno 40'."""
    if err.errno == errno.ELOOP:
        return f"{err.filename}: is a symbolic link, refused (run-dir files are never followed through links)"
    where = f"{err.filename}: " if err.filename is not None else ""
    return f"{where}{err.strerror or err}"


def write_atomic(path: Path, write: Callable[[int], None], *, mode: int = 0o666, durable: bool = False) -> None:
    """Have `write` fill a temp file (given its fd) beside `path`, then rename it over `path`: a reader sees the
    old file or the new one, never a torn one. `durable` fsyncs the file before and its directory after the
    rename (a checkpoint must survive a crash of the node). A planted symlink at the temp name is refused."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file path", str(path))
    # Our host, pid and thread in the name: two threads writing one file (a sweep submitting from threads) never
    # share a temp file, nor do two nodes writing one file of a shared directory (each rank claims a checkpoint's
    # OWNER): in containers with a pid namespace each (podman) the same ranks of two nodes have the same pids.
    # A stale one of a dead process with our name is overwritten.
    tmp = path.with_name(f".{path.name}.tmp{HOST}-{os.getpid()}-{threading.get_native_id()}")
    try:
        fd = open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            write(fd)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) != str(path):
            raise type(exc)(exc.errno, exc.strerror, str(path)) from exc  # name the target, not our temp file
        raise
    if durable:
        fsync_dir(path.parent)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written (a write may be short)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o666, durable: bool = False) -> None:
    write_atomic(path, lambda fd: write_all(fd, data), mode=mode, durable=durable)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temp file and a rename; the mode is 0o666 minus the umask."""
    write_bytes_atomic(path, text.encode())


def write_json_atomic(path: Path, value: Any) -> None:
    """`value` as one JSON line, written atomically (the run dir's small records: markers, announcements)."""
    write_text_atomic(path, json.dumps(value) + "\n")


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable (POSIX needs the directory itself synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MAX_RECORD_BYTES = 256 * 1024  # a run-dir record is a few KB; anything bigger is not ours


def read_bounded(path: Path | str, limit: int = MAX_RECORD_BYTES, tail: bool = False) -> bytes | None:
    """Up to `limit` bytes (the last ones with `tail`), or None when missing, a symlink or unreadable. O_NONBLOCK:
    a FIFO planted in a run dir must not hang a reader."""
    try:
        fd = open_fd(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if tail:
            size = os.fstat(fd).st_size
            os.lseek(fd, max(0, size - limit), os.SEEK_SET)
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 65536))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_json(path: Path | str, limit: int = MAX_RECORD_BYTES) -> dict[str, Any] | None:
    """A JSON object from a file read with `read_bounded`; None when missing, torn, too big or not an object
    (a record being rewritten counts as absent)."""
    data = read_bounded(path, limit)
    try:
        value = json.loads(data) if data else None
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes (not ours either)
        return None
    return value if isinstance(value, dict) else None


NOT_A_DIRECTORY, NOT_MINE, OPEN_TO_OTHERS = "not a directory", "owned by another user", "writable by others"


def private_dir_problem(path: Path, *, parents: bool = True, narrow: bool = False) -> tuple[str | None, os.stat_result]:
    """The one test of "a directory only this user can change", creating `path` (0o700) where missing: a real
    directory, not a symlink, owned by this user and writable by no one else. Returns what it is not (None: it
    is; else NOT_A_DIRECTORY, NOT_MINE or OPEN_TO_OTHERS) and its lstat, so the caller words its own refusal.
    `narrow`: a private one that others may still read or enter is made 0o700. OSError where it cannot be made."""
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # whatever is there is judged below, never followed
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return NOT_A_DIRECTORY, info
    if info.st_uid != os.geteuid():
        return NOT_MINE, info
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return OPEN_TO_OTHERS, info
    if narrow and info.st_mode & 0o077:
        path.chmod(0o700)
    return None, info


def private_dir(path: Path) -> bool:
    """Whether `path` is a directory only this user can change (`private_dir_problem`), creating it where
    missing. A cache of compiled code lives only in such a directory."""
    try:
        return private_dir_problem(path)[0] is None
    except OSError:
        return False


def read_private(path: Path, limit: int) -> bytes | None:
    """The file's bytes if it is a regular file owned by this user, writable by no one else and at most `limit`
    bytes; None otherwise (missing, a symlink, a FIFO, another owner's, group- or world-writable, too big)."""
    try:
        fd = open_fd(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not _private(info) or info.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _private(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
