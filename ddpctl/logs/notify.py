"""Wake-ups for `ddpctl logs -f` from Linux inotify (through ctypes), used only where they can be trusted.

inotify hears only about writes made through this machine's kernel. On NFS, Lustre, GPFS, BeeGFS ... the ranks
write from compute nodes and no event ever arrives here, so events are used only on local filesystems (by type,
from /proc/self/mounts). Everywhere else, and whenever anything here fails, the follower just polls.
"""

from __future__ import annotations

import ctypes
import os
import re
import select
import sys
import time
from pathlib import Path

LOCAL_FS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "f2fs", "zfs", "overlay", "jfs", "reiserfs", "bcachefs"}
)
_IN_MODIFY, _IN_ATTRIB, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x2, 0x4, 0x80, 0x100, 0x200
_MASK = _IN_MODIFY | _IN_ATTRIB | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_OCTAL = re.compile(r"\\([0-7]{3})")  # /proc/mounts writes a space in a mount point as \040


def mount_fs_type(path: str, mounts: str) -> str:
    """The filesystem type of the mount holding absolute `path`, from /proc/self/mounts text ("" if none)."""
    best, fstype = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    return fstype


class Notifier:
    """An inotify descriptor watching directories: `wait` returns early when a file in them changes."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd = fd
        self._libc = libc

    @classmethod
    def open(cls, path: Path) -> Notifier | None:
        """A notifier if `path` is on a local filesystem and inotify works here, else None (poll instead)."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            mounts = Path("/proc/self/mounts").read_text()
            if mount_fs_type(os.path.realpath(path), mounts) not in LOCAL_FS:
                return None
            libc = ctypes.CDLL(None, use_errno=True)
            fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        except (OSError, AttributeError):
            return None
        return cls(fd, libc) if fd >= 0 else None

    def watch(self, directory: Path) -> bool:
        """Watch a directory's files; False if the kernel refused (missing, or out of watches)."""
        return int(self._libc.inotify_add_watch(self.fd, os.fsencode(directory), _MASK)) >= 0

    def wait(self, timeout: float) -> bool:
        """Block until an event or `timeout`; True if there were events (all consumed)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            while os.read(self.fd, 1 << 16):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        os.close(self.fd)


class Backoff:
    """The pause between polls: `fast` after one that read something, doubling while idle up to `slow`."""

    def __init__(self, fast: float, slow: float) -> None:
        self.fast, self.slow, self.current = fast, slow, fast

    def next(self, active: bool) -> float:
        self.current = self.fast if active else min(self.current * 2, self.slow)
        return self.current


class Pacer:
    """The wait between polls: backoff polling, or inotify wake-ups where they can be trusted."""

    def __init__(self, fast: float, slow: float, gap: float, notify: bool, root: Path) -> None:
        self.gap = gap  # with inotify: the pause after a poll that read something
        self.backoff = Backoff(fast, slow)
        self.notifier = Notifier.open(root) if notify else None
        self.watch(root)

    def watch(self, directory: Path) -> None:
        if self.notifier is not None and not self.notifier.watch(directory):
            self.close()  # missing directory, or out of inotify watches: poll instead

    def pause(self, active: bool, until_state: float) -> bool:
        """Wait; True if the files may have changed (always, when polling)."""
        if self.notifier is None:
            time.sleep(self.backoff.next(active))
            return True
        if active:
            time.sleep(self.gap)
            return True
        return self.notifier.wait(max(0.0, until_state))

    def close(self) -> None:
        if self.notifier is not None:
            self.notifier.close()
            self.notifier = None
