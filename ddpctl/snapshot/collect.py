"""What goes into a snapshot: a manifest of entries (path, kind, mode, size, and the content id where git already
knows it), from git's index or a directory walk (`ddpctl.snapshot.walk`). Nothing here reads a file's bytes:
sizes and counts are checked against the limits from `lstat` before anything is read.

A git content id is trusted only for a file git itself vouches for: tracked, stage 0, tag `H` (not
skip-worktree, not assume-unchanged) and not reported changed by `git status`. Every other file is hashed as it
is stored (`ddpctl.snapshot.store`), so an id always names the bytes that were hashed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl import proc
from ddpctl.errors import SpecError
from ddpctl.sanitize import visible

FILE, EXEC, LINK = "file", "exec", "link"
GIT_KINDS = {"100644": FILE, "100755": EXEC, "120000": LINK}
SUBMODULE = "160000"
SKIP_DIRS = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_files: int = 50_000
    max_bytes: int = 512 * MiB

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str]) -> Limits:
        return cls(
            whole_number(env, "DDPCTL_SNAPSHOT_MAX_FILES", cls.max_files),
            whole_number(env, "DDPCTL_SNAPSHOT_MAX_MB", cls.max_bytes // MiB) * MiB,
        )


def whole_number(env: dict[str, str] | os._Environ[str], name: str, default: int) -> int:
    """A limit from the environment: ASCII digits only (`str.isdigit` also takes '²', which int() refuses)."""
    value = env.get(name, "")
    if not value:
        return default
    if not (value.isascii() and value.isdigit()) or len(value) > 12:
        raise SpecError(f"{name}: got {value!r}, expected a whole number such as {default}")
    return int(value)


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the snapshot's root, "/"-separated
    kind: str  # file, exec or link
    mode: int = 0o644  # the source's permission bits: the run's copy never gets more
    size: int = 0
    oid: str | None = None  # content id git vouches for; None: hashed while it is stored
    source: str = ""  # where the bytes are read from (a link leaving the tree: its target), "" = root/path
    target: str = ""  # a link's target, as the snapshot holds it


@dataclass
class Manifest:
    root: Path
    limits: Limits = field(default_factory=Limits)
    entries: list[Entry] = field(default_factory=list)
    commit: str | None = None
    branch: str | None = None
    dirty: bool = False
    skipped: list[str] = field(default_factory=list)  # git submodules, nested repositories: not snapshotted
    left_out: list[str] = field(default_factory=list)  # "path (why)": hidden and data-like files
    total: int = 0  # bytes of the files so far

    def add(self, entry: Entry) -> None:
        """Add `entry`, or stop with the limit error before anything beyond a limit is read."""
        if len(self.entries) >= self.limits.max_files:
            raise too_big(self, f"more than {self.limits.max_files} files")
        if self.total + entry.size > self.limits.max_bytes:
            count, size = len(self.entries) + 1, self.total + entry.size
            big = entry.size > self.limits.max_bytes or count == 1  # say what is big, not "0 files / 2048.0 MB"
            found = (
                f"{visible(entry.path)[:200]} alone is {mb(entry.size)}" if big else f"{count} files make {mb(size)}"
            )
            raise too_big(self, f"more than {self.limits.max_bytes // MiB} MB", f" ({found})")
        self.entries.append(entry)
        self.total += entry.size


def mb(size: int) -> str:
    return f"{size / MiB:.1f} MB"


def too_big(manifest: Manifest, amount: str, detail: str = "") -> SpecError:
    """The limit error, raised before anything beyond the limit is read (`amount`: what the code holds)."""
    limits = manifest.limits
    return SpecError(
        f"snapshot: {manifest.root} holds {amount} of code to snapshot{detail}; "
        f"allowed are {limits.max_files} files / "
        f"{limits.max_bytes // MiB} MB (DDPCTL_SNAPSHOT_MAX_FILES, DDPCTL_SNAPSHOT_MAX_MB): keep data and outputs "
        "out of the code (.gitignore or snapshot_exclude them), or set snapshot: off"
    )


def check_name(root: Path, rel: str) -> None:
    """Names are bytes on disk; the snapshot's record is UTF-8 text: a name that is not UTF-8 is refused."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
        raise SpecError(
            f"snapshot: {root}: the file name {shown!r} is not UTF-8; rename it, leave it out "
            "(.gitignore or snapshot_exclude), or set snapshot: off"
        ) from None


def kind_of(st: os.stat_result) -> str:
    return EXEC if st.st_mode & stat.S_IXUSR else FILE


def git(root: Path, *args: str) -> proc.Completed:
    return proc.run(["git", "-C", str(root), *args], timeout=120, errors="surrogateescape")


def git_root(directory: Path) -> Path | None:
    if not proc.available("git"):
        return None
    done = git(directory, "rev-parse", "--show-toplevel")
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def parse_status(text: str) -> tuple[str | None, str | None, set[str], bool]:
    """`git status --porcelain=v2 -z --branch`: (commit, branch, paths whose work-tree content differs from the
    index or that are untracked, dirty)."""
    commit = branch = None
    changed: set[str] = set()
    dirty = False
    tokens = iter(text.split("\0"))
    for token in tokens:
        if token.startswith("# branch.oid "):
            value = token.split(" ", 2)[2]
            commit = None if value == "(initial)" else value
        elif token.startswith("# branch.head "):
            value = token.split(" ", 2)[2]
            branch = None if value == "(detached)" else value
        elif token.startswith("? "):
            changed.add(token[2:])
            dirty = True
        elif token[:2] in ("1 ", "2 ", "u "):
            dirty = True
            fields = token.split(" ", {"1": 8, "2": 9, "u": 10}[token[0]])
            if token[0] == "2":
                next(tokens, None)  # the rename's original path
            if token[0] == "u" or fields[1][1] != ".":
                changed.add(fields[-1])
    return commit, branch, changed, dirty


def parse_ls_files(text: str) -> Iterator[tuple[str, str, str, str]]:
    """`git ls-files -s -v -z`: (tag, mode, blob id, path) of stage-0 entries. Tag `H` is a file git keeps
    checking; `S` (skip-worktree, sparse checkouts) and lower case (assume-unchanged) are files it does not."""
    for record in text.split("\0"):
        meta, tab, path = record.partition("\t")
        parts = meta.split()
        if tab and len(parts) == 4 and parts[3] == "0":
            yield parts[0], parts[1], parts[2], path


def pathspec(root: Path, exclude: Iterable[Path]) -> list[str]:
    """`-- . :(exclude)...` for the excluded directories inside the repository (run_dir, checkpoint dir):
    git then neither lists nor counts what ddpctl itself writes there (its staging dir is not "dirty")."""
    spec = ["--", "."]
    for path in exclude:
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        if rel != ".":
            spec.append(f":(top,exclude,literal){rel}")
    return spec


def git_lists(root: Path, exclude: Iterable[Path]) -> tuple[str, str]:
    spec = pathspec(root, exclude)
    status = git(root, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", *spec)
    listed = git(root, "ls-files", "-s", "-v", "-z", *spec)
    for done in (status, listed):
        if done.returncode != 0:
            raise SpecError(f"snapshot: {' '.join(done.argv[3:5])} failed in {root}: {done.stderr.strip()}")
    return status.stdout, listed.stdout
