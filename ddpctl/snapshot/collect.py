"""What goes into a snapshot: a manifest of (path, kind, content id), from git's index or a directory walk.

Content ids are git blob ids (sha1 of "blob <size>\\0" + bytes), so a clean file's id comes for free from
`git ls-files -s` (git's index, kept fresh by `git status`) and only changed or untracked files are read and
hashed here. A file whose bytes differ from its blob because of a git clean/smudge filter (LFS, eol conversion)
is stored with its work-tree bytes under the index's id.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl import proc
from ddpctl.errors import SpecError

FILE, EXEC, LINK = "file", "exec", "link"
GIT_KINDS = {"100644": FILE, "100755": EXEC, "120000": LINK}  # 160000 (submodule) is not snapshotted
SKIP_DIRS = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the manifest's root, "/"-separated
    kind: str  # file, exec or link
    oid: str  # git blob id of the bytes (of the link target for a link)


@dataclass
class Manifest:
    root: Path
    entries: list[Entry] = field(default_factory=list)
    commit: str | None = None
    branch: str | None = None
    dirty: bool = False
    skipped: list[str] = field(default_factory=list)  # submodules and the like, named in snapshot.json
    truncated: bool = False  # the directory walk stopped at a limit


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def entry_for(root: Path, rel: str) -> Entry | None:
    """The work tree's current content of `rel` (None when it is gone or not a file/link)."""
    path = root / rel
    try:
        if path.is_symlink():
            return Entry(rel, LINK, blob_id(str(path.readlink()).encode()))
        if not path.is_file():
            return None
        kind = EXEC if os.access(path, os.X_OK) else FILE
        return Entry(rel, kind, blob_id(path.read_bytes()))
    except OSError:
        return None


def git(root: Path, *args: str) -> proc.Completed:
    return proc.run(["git", "-C", str(root), *args], timeout=120)


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


def parse_ls_files(text: str) -> Iterable[tuple[str, str, str]]:
    """`git ls-files -s -z`: (mode, blob id, path) of stage-0 entries."""
    for record in text.split("\0"):
        meta, tab, path = record.partition("\t")
        parts = meta.split()
        if tab and len(parts) == 3 and parts[2] == "0":
            yield parts[0], parts[1], path


def git_manifest(root: Path, exclude: Iterable[Path]) -> Manifest:
    status = git(root, "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")
    listed = git(root, "ls-files", "-s", "-z")
    for done in (status, listed):
        if done.returncode != 0:
            raise SpecError(f"snapshot: {' '.join(done.argv[3:5])} failed in {root}: {done.stderr.strip()}")
    commit, branch, changed, dirty = parse_status(status.stdout)
    manifest = Manifest(root, commit=commit, branch=branch, dirty=dirty)
    excluded = [p.resolve() for p in exclude]
    paths = {}
    for mode, oid, path in parse_ls_files(listed.stdout):
        if mode not in GIT_KINDS:
            manifest.skipped.append(path)
        elif path not in changed:
            paths[path] = Entry(path, GIT_KINDS[mode], oid)
    for path in changed:
        if (entry := entry_for(root, path)) is not None:
            paths[path] = entry
    manifest.entries = [e for p, e in sorted(paths.items()) if not inside(root / p, excluded)]
    return manifest


def inside(path: Path, dirs: list[Path]) -> bool:
    return any(path == d or d in path.parents for d in dirs)


def dir_manifest(root: Path, exclude: Iterable[Path], max_files: int, max_bytes: int) -> Manifest:
    """Every file under `root` but hidden directories (.git, .cache, .venv, ...), __pycache__ and `exclude`;
    links are kept as links. Stops reading once past a limit (the caller reports it): nothing is hashed beyond
    it, so a script left in a large directory (a home directory) costs a bounded walk and one clear error."""
    excluded = [p.resolve() for p in exclude]
    manifest = Manifest(root)
    total = 0
    for current, dirs, files in os.walk(root):
        here = Path(current)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS and not d.startswith(".") and not inside((here / d).resolve(), excluded)
        )
        for name in sorted(files):
            total += (here / name).lstat().st_size
            if len(manifest.entries) >= max_files or total > max_bytes:
                manifest.truncated = True
                return manifest
            rel = (here / name).relative_to(root).as_posix()
            if (entry := entry_for(root, rel)) is not None:
                manifest.entries.append(entry)
    return manifest
