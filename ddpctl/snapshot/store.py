"""The content-addressed snapshot store under `<run_dir>/.snapshots/` (on the shared filesystem the nodes see).

    objects/<id[:2]>/<id[2:]>[.x]   one read-only file per content (".x": executable), written tmp + rename
    trees/<tree id>/                the snapshot as a directory: hard links to the objects (copies where the
                                    filesystem has no hard links); built under a temporary name, then renamed
    trees/<tree id>.json            its file count and size

The tree id is a hash of the sorted manifest, so an unchanged second submit finds its tree and copies nothing.
Nothing is ever modified in place; removing `.snapshots/` is safe when no run of that run_dir is active.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from ddpctl import safeio
from ddpctl.errors import SpecError
from ddpctl.snapshot.collect import EXEC, LINK, Entry, Manifest

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    max_files: int = 50_000
    max_bytes: int = 512 * MiB

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str]) -> Limits:
        def number(name: str, default: int) -> int:
            value = env.get(name, "")
            if not value:
                return default
            if not value.isdigit():
                raise SpecError(f"{name}: got {value!r}, expected a whole number")
            return int(value)

        return cls(
            number("DDPCTL_SNAPSHOT_MAX_FILES", cls.max_files),
            number("DDPCTL_SNAPSHOT_MAX_MB", cls.max_bytes // MiB) * MiB,
        )


@dataclass(frozen=True)
class Stored:
    tree_id: str
    path: Path
    files: int
    bytes: int
    new_bytes: int  # copied by this submit (0 when the tree or every object already existed)


def tree_id(entries: list[Entry]) -> str:
    text = "".join(f"{e.kind} {e.oid} {e.path}\n" for e in entries)
    return hashlib.sha256(text.encode()).hexdigest()


def too_big(manifest: Manifest, files: int, size: int, limits: Limits) -> SpecError:
    return SpecError(
        f"snapshot: {manifest.root} holds {'more than ' if manifest.truncated else ''}{files} files / "
        f"{size / MiB:.1f} MB of code to snapshot; allowed are {limits.max_files} files / "
        f"{limits.max_bytes // MiB} MB (DDPCTL_SNAPSHOT_MAX_FILES, DDPCTL_SNAPSHOT_MAX_MB): keep data and outputs "
        "out of the repository (or .gitignore them), or set snapshot: off"
    )


def store_tree(store: Path, manifest: Manifest, limits: Limits) -> Stored:
    tid = tree_id(manifest.entries)
    tree, meta = store / "trees" / tid, store / "trees" / f"{tid}.json"
    if tree.is_dir() and meta.is_file():
        counts = json.loads(meta.read_text())
        return Stored(tid, tree, int(counts["files"]), int(counts["bytes"]), 0)
    sizes = [(manifest.root / e.path).lstat().st_size for e in manifest.entries]
    if manifest.truncated or len(sizes) > limits.max_files or sum(sizes) > limits.max_bytes:
        raise too_big(manifest, len(sizes), sum(sizes), limits)
    tmp = store / "trees" / f".tmp-{tid[:16]}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        new = sum(place(store, manifest.root, entry, tmp) for entry in manifest.entries)
        try:
            tmp.rename(tree)
        except OSError:  # another submit built the same tree meanwhile: theirs is as good
            if not tree.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    safeio.write_text_atomic(meta, json.dumps({"files": len(sizes), "bytes": sum(sizes)}))
    return Stored(tid, tree, len(sizes), sum(sizes), new)


def place(store: Path, root: Path, entry: Entry, tree: Path) -> int:
    """Put `entry` into `tree` (linking its object, storing that first if new); returns the bytes copied."""
    target = tree / entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    source = root / entry.path
    if entry.kind == LINK:
        target.symlink_to(source.readlink())
        return 0
    obj = store / "objects" / entry.oid[:2] / (entry.oid[2:] + (".x" if entry.kind == EXEC else ""))
    copied = 0
    if not obj.exists():
        obj.parent.mkdir(parents=True, exist_ok=True)
        part = obj.with_name(f".{obj.name}.{uuid.uuid4().hex[:8]}")
        shutil.copyfile(source, part, follow_symlinks=False)
        part.chmod(0o555 if entry.kind == EXEC else 0o444)  # shared by every tree: never written again
        part.replace(obj)
        copied = obj.stat().st_size
    try:
        os.link(obj, target)
    except OSError:  # no hard links on this filesystem
        shutil.copy2(obj, target)
    return copied
