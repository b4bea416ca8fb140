"""From a manifest to the run's own copy of the code: `resolve` stores what the store lacks and lists the
snapshot (path, kind, mode, id or link target, size); `materialise` writes that listing into the run's `code/`.

The run's copy is made of copies, not links into the store: a script that appends to a file beside itself
changes its own run's copy only. Each file is cloned (`FICLONE`: a reflink, no data copied, on btrfs, XFS and
other filesystems that share extents), else copied in the kernel (`copy_file_range`), else by read and write.
Files get the source's permission bits (never more) less the umask; directories 0777 less the umask.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ddpctl import safeio
from ddpctl.errors import SpecError
from ddpctl.snapshot.collect import LINK, Manifest
from ddpctl.snapshot.store import hash_file, have, object_path, put

FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h
NO_CLONE = {errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL, errno.EXDEV, errno.EBADF, errno.ENOSYS, errno.EPERM}


@dataclass(frozen=True)
class Item:
    path: str
    kind: str
    mode: int
    ref: str  # content id (files) or link target (links)
    size: int


@dataclass
class Resolved:
    items: list[Item]
    new_bytes: int  # stored by this submit

    @property
    def tree_id(self) -> str:
        text = "".join(f"{i.kind} {i.mode:o} {i.ref} {i.path}\n" for i in self.items)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def files(self) -> int:
        return sum(1 for i in self.items if i.kind != LINK)

    @property
    def bytes(self) -> int:
        return sum(i.size for i in self.items)


def resolve(store: Path, manifest: Manifest) -> Resolved:
    """Every entry's content in the store, by the id of its bytes as hashed. A file git vouches for whose
    object exists is not read at all; others are hashed (streaming) and stored if new, under the id of what
    was written (a file edited meanwhile is stored, and run, as it was read)."""
    items, new = [], 0
    for e in manifest.entries:
        if e.kind == LINK:
            items.append(Item(e.path, LINK, 0, e.target, 0))
            continue
        source = Path(e.source) if e.source else manifest.root / e.path
        oid = e.oid or hash_file(source, e.size)
        if not have(store, oid, e.size):
            oid = put(store, source, e.size)
            new += e.size
        items.append(Item(e.path, e.kind, e.mode & 0o777, oid, e.size))
    return Resolved(items, new)


class Copier:
    """Copies store objects into a run's tree, remembering whether this filesystem clones."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.clones = True

    def file(self, item: Item, target: Path) -> None:
        src = safeio.open_read(object_path(self.store, item.ref))
        try:
            st = os.fstat(src)
            if st.st_uid != os.geteuid() or st.st_size != item.size:
                raise SpecError(f"snapshot: store object {item.ref} for {item.path} is not as stored; remove "
                                f"{self.store} (a cache) and submit again")  # fmt: skip
            dst = safeio.open_fd(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, item.mode)
            try:
                self.data(src, dst, item.size)
            finally:
                os.close(dst)
        finally:
            os.close(src)

    def data(self, src: int, dst: int, size: int) -> None:
        if self.clones and size:
            try:
                fcntl.ioctl(dst, FICLONE, src)
                return
            except OSError as err:
                if err.errno not in NO_CLONE:
                    raise
                self.clones = False
        done = 0
        try:
            while done < size and (n := os.copy_file_range(src, dst, size - done)):
                done += n
        except OSError as err:
            if err.errno not in NO_CLONE:
                raise
        while done < size and (chunk := os.pread(src, min(1 << 20, size - done), done)):
            os.pwrite(dst, chunk, done)
            done += len(chunk)


def materialise(store: Path, resolved: Resolved, code: Path) -> None:
    """Write the listing into `code` (which must not exist). A failure (a full disk) names `code`; the caller
    removes what was written (the staging run dir goes as a whole)."""
    copier = Copier(store)
    made: set[str] = set()
    try:
        code.mkdir()
        for item in resolved.items:
            parent = item.path.rpartition("/")[0]
            if parent and parent not in made:
                (code / parent).mkdir(parents=True, exist_ok=True)
                made.add(parent)
            if item.kind == LINK:
                (code / item.path).symlink_to(item.ref)
            else:
                copier.file(item, code / item.path)
    except OSError as err:
        raise SpecError(
            f"snapshot: writing the run's copy of the code to {code} failed: {err.strerror or err}; "
            "free space there, or set snapshot: off"
        ) from err
