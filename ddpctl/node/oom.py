"""Out-of-memory kills in this node's memory cgroup: the one place the launcher reads cgroup files.

A rank the kernel's OOM killer ends (Slurm's `ConstrainRAMSpace`, a container's limit) dies of SIGKILL and
writes nothing; torchrun then reports only "exitcode -9". The memory cgroup the launcher and its workers share
counts those kills (`oom_kill` in cgroup v1's `memory.oom_control`, v2's `memory.events`), so the launcher
reads the count before torchrun starts and after it ends: a difference is an OOM kill in this attempt, with
the limit that caused it. On cgroup v1 the counter is per cgroup (not summed over children); Slurm puts every
process of a task, workers included, in that task's cgroup, which is the launcher's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_NO_LIMIT = 1 << 60  # v1 reports "no limit" as a huge page-aligned number


@dataclass(frozen=True)
class MemoryCgroup:
    root: Path  # the hierarchy's mount point
    path: Path  # this cgroup's directory under it
    v1: bool

    @property
    def counter(self) -> Path:
        return self.path / ("memory.oom_control" if self.v1 else "memory.events")

    def limit_files(self) -> list[Path]:
        """The limit of this cgroup and of each ancestor up to the mount: the smallest one applies."""
        name = "memory.limit_in_bytes" if self.v1 else "memory.max"
        out, here = [], self.path
        while True:
            out.append(here / name)
            if here == self.root or self.root not in here.parents:
                return out
            here = here.parent


def memory_cgroup(proc_cgroup: str, root: Path = CGROUP_ROOT) -> MemoryCgroup | None:
    """Where this process's memory cgroup keeps its OOM count, from /proc/self/cgroup's text (pure).

    v1 has a `N:memory:/path` line; on v2 (or hybrid with no v1 memory controller) the `0::/path` line."""
    unified = None
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            return MemoryCgroup(root / "memory", root / "memory" / parts[2].lstrip("/"), v1=True)
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2].lstrip("/")
    if unified is None:
        return None
    return MemoryCgroup(root, root / unified, v1=False)


def parse_oom_kills(text: str) -> int | None:
    """The `oom_kill N` count of memory.oom_control / memory.events text (pure); None when absent."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def parse_limit(text: str | None) -> int | None:
    """A memory limit in bytes from memory.limit_in_bytes / memory.max (pure); None for no limit."""
    value = (text or "").strip()
    if not value.isdigit():
        return None  # "max" (v2) or unreadable
    return None if int(value) >= _NO_LIMIT else int(value)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None


class OomCounter:
    """Reads this process's memory cgroup's OOM-kill count at `start()` and the kills since at `since()`."""

    def __init__(self, proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT) -> None:
        text = _read(proc_cgroup)
        self.cgroup = memory_cgroup(text, root) if text is not None else None
        self.before: int | None = None

    def _count(self) -> int | None:
        if self.cgroup is None:
            return None
        text = _read(self.cgroup.counter)
        return parse_oom_kills(text) if text is not None else None

    def start(self) -> None:
        self.before = self._count()

    def since(self) -> tuple[int, int | None]:
        """(OOM kills since start, the cgroup's limit in bytes or None); (0, None) when nothing can be read."""
        after = self._count()
        if self.before is None or after is None or after <= self.before:
            return 0, None
        limits = [parse_limit(text) for text in map(_read, self.cgroup.limit_files() if self.cgroup else [])]
        return after - self.before, min((n for n in limits if n is not None), default=None)
