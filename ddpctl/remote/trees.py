"""The cluster's code trees (`<ddpctl home>/remote/trees/<tree id>/`): built once per content from the received
objects, read-only, and verified against their id before a later submit reuses one.

A tree is made a git repository of one commit, so that the submit here snapshots it in git mode: the whole tree
(not only the script's directory) goes with the job, exactly as on the laptop. Runs never run the tree itself
(each runs its run dir's own copy; `snapshot: off` is refused for remote submits), but a tree is a directory of
the user's that anything may change: an unchanged later submit ("sent 0 objects") must not snapshot a changed
tree. So a tree is made read-only once built, and reused only when every file still has the content id, size
and exec bit of the listing, every link its target, and nothing was added; else it is rebuilt.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Mapping
from pathlib import Path

from ddpctl import proc
from ddpctl.errors import SpecError
from ddpctl.snapshot.collect import LINK
from ddpctl.snapshot.copy import Item, Resolved, materialise
from ddpctl.snapshot.store import hash_file, publish_tree

WRITE_BITS = 0o222


def trees_dir(home: Path) -> Path:
    where = home / "trees"
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    return where


def git(tree: Path, *args: str) -> None:
    identity = ["-c", "user.name=ddpctl", "-c", "user.email=ddpctl@localhost", "-c", "commit.gpgsign=false"]
    done = proc.run(["git", *identity, "-C", str(tree), *args], timeout=120)
    if done.returncode != 0:
        raise SpecError(f"remote submit: git {args[0]} in {tree} failed: {done.stderr.strip()[-300:]}")


def tree(store: Path, items: list[Item], home: Path) -> Path:
    """The code tree of `items`: an intact one built before, else built now."""
    resolved = Resolved(items, 0)
    final = trees_dir(home) / resolved.tree_id
    if (final / ".git").is_dir() and intact(final, items):
        os.utime(final)  # used last now: the store keeps the trees used last (ddpctl.remote.storegc)
        return final
    if final.exists():
        discard(final)  # changed since it was built: never snapshotted again
    made = final.parent / f".tmp-{uuid.uuid4().hex}"
    try:
        materialise(store, resolved, made)
        git(made, "init", "-q")
        git(made, "add", "-A", "-f")
        git(made, "commit", "-q", "--allow-empty", "-m", "ddpctl submit --cluster")
        freeze(made)
        publish_tree(made, final)
    finally:
        if made.exists():
            discard(made)
    return final


def intact(root: Path, items: list[Item]) -> bool:
    """Whether the tree outside .git holds exactly `items`, each with its content id (read and hashed)."""
    wanted = {item.path: item for item in items}
    parents = {item.path.rsplit("/", n)[0] for item in items for n in range(1, item.path.count("/") + 1)}
    for directory, dirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in dirs + files:
            path = name if rel == "." else f"{rel}/{name}"
            if path not in wanted and path not in parents:
                return False  # added since
    return all(_same(root / item.path, item) for item in items)


def _same(path: Path, item: Item) -> bool:
    try:
        info = os.lstat(path)
        if item.kind == LINK:
            return stat.S_ISLNK(info.st_mode) and str(path.readlink()) == item.ref
        if not stat.S_ISREG(info.st_mode) or info.st_size != item.size:
            return False
        return bool(info.st_mode & 0o100) == bool(item.mode & 0o100) and hash_file(path, item.size) == item.ref
    except (OSError, SpecError):
        return False


def freeze(root: Path) -> None:
    """Everything in the tree (its .git too) read-only: a run or a tool writing into it fails loudly."""
    for directory, dirs, files in os.walk(root, topdown=False):
        for name in [*files, *dirs]:
            path = Path(directory) / name
            info = os.lstat(path)
            if not stat.S_ISLNK(info.st_mode):
                path.chmod(stat.S_IMODE(info.st_mode) & ~WRITE_BITS)
    root.chmod(stat.S_IMODE(root.stat().st_mode) & ~WRITE_BITS)


def discard(root: Path) -> None:
    """Remove a tree (read-only inside: made writable first), moved aside first so no submit finds half of it."""
    aside = root.parent / f".gone-{uuid.uuid4().hex}"
    try:
        root.rename(aside)
    except OSError:
        return  # gone already (another submit discarded it)
    for directory, dirs, _files in os.walk(aside):
        for name in ["", *dirs]:
            with contextlib.suppress(OSError):
                path = Path(directory) / name if name else Path(directory)
                if not path.is_symlink():
                    path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o700)
    shutil.rmtree(aside, ignore_errors=True)


def tree_of(store: Path, items: list[Item], env: Mapping[str, str] | None = None) -> Path:
    from ddpctl.remote.receive import home

    return tree(store, items, home(env))
