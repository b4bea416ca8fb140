"""Crash-safe file writing for checkpoints: temp file + fsync + rename + directory fsync, with a content hash.

A reader that finds a file under its final name therefore sees all of it; the size and SHA-256 recorded at
write time let a loader tell a truncated or overwritten file from a good one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

CHUNK = 1 << 22


class _HashingWriter:
    """File-like sink for torch.save that hashes the bytes on their way to disk (no second read pass)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        view = memoryview(data)
        self._hash.update(view)
        done = 0
        while done < len(view):
            done += os.write(self._fd, view[done:])
        self.size += len(view)
        return len(view)

    def flush(self) -> None:
        """Nothing buffered here: every write goes straight to the descriptor."""

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable (POSIX needs the directory itself synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_torch_save(obj: Any, path: Path) -> dict[str, Any]:
    """torch.save `obj` to `path` atomically; return {"size", "sha256"} of the bytes written."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        writer = _HashingWriter(fd)
        torch.save(obj, writer)  # type: ignore[arg-type]  # any object with write() is accepted
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    fsync_dir(path.parent)
    return {"size": writer.size, "sha256": writer.hexdigest()}


def atomic_write_json(obj: Any, path: Path) -> None:
    """Write JSON atomically (same temp + fsync + rename dance as the tensors)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    data = (json.dumps(obj, sort_keys=True, indent=1) + "\n").encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    fsync_dir(path.parent)


def read_json(path: Path) -> Any:
    """Parsed JSON, or None for a missing or unparsable file (a torn write counts as absent)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def file_matches(path: Path, expected: dict[str, Any], check_hash: bool) -> str | None:
    """None when `path` has the recorded size (and hash); otherwise why not, for the warning."""
    try:
        size = path.stat().st_size
    except OSError:
        return f"{path.name} is missing"
    if size != expected.get("size"):
        return f"{path.name} has {size} bytes, {expected.get('size')} were written"
    if check_hash:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
        if digest.hexdigest() != expected.get("sha256"):
            return f"{path.name} content does not match its recorded SHA-256"
    return None
