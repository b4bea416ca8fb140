"""The private content-addressed store under `<run_dir>/.snapshots/` (on the shared filesystem the nodes see).

    .snapshots/                      mode 0700, owned by the submitting user: checked on every submit
      v2/objects/<id[:2]>/<id[2:]>   one read-only file per content; id = git blob id of the bytes as written
      v2/tmp/                        objects being written (renamed into objects/ once hashed)

An object's id is computed from the bytes as they are copied in (read a chunk, hash it, write it), never taken
from elsewhere: `put` stores under the id of what it wrote. A git id is used to find an object without reading
the file (an unchanged resubmit copies nothing into the store) only for files git vouches for
(`ddpctl.snapshot.collect`). Nobody but the owner can write the store, so an object cannot be planted there;
objects are also checked to be the owner's and of the recorded size before a run copies them.

The store is a cache: each run runs its own copy (`ddpctl.snapshot.copy`), never the objects themselves, so
nothing a run writes reaches the store or another run. Removing `.snapshots/` is safe at any time.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
import uuid
from pathlib import Path

from ddpctl import safeio
from ddpctl.errors import SpecError

STORE_DIR = ".snapshots"
LAYOUT = "v2"  # objects of the earlier, shared layout (.snapshots/objects) are never trusted
CHUNK = 1 << 20


def owner_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def private_dir(path: Path) -> None:
    """Make sure `path` is a directory only the current user can write (safeio.private_dir_problem), creating it
    0700 if needed; an older, readable one is narrowed to 0700 (never widened); one that others own or can write
    is refused."""
    try:
        problem, st = safeio.private_dir_problem(path, parents=False, narrow=True)
    except OSError as err:
        raise SpecError(
            f"snapshot: cannot create the code snapshot store {path}: {err.strerror or err}; give the job a "
            "run_dir you can write (run_dir: ...), or set snapshot: off"
        ) from err
    if problem == safeio.NOT_A_DIRECTORY:
        raise SpecError(f"snapshot: the code snapshot store {path} is not a directory (a link?); remove it")
    if problem == safeio.NOT_MINE:
        raise SpecError(
            f"snapshot: the code snapshot store {path} belongs to {owner_name(st.st_uid)}: a store is private "
            "to its owner (0700), so that nobody can plant code your runs would execute; give your jobs a "
            "run_dir of your own (e.g. run_dir: runs-$USER), or set snapshot: off"
        )
    if problem == safeio.OPEN_TO_OTHERS:
        raise SpecError(
            f"snapshot: the code snapshot store {path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}), "
            "so its contents cannot be trusted: remove it (it is a cache), then submit again"
        )


def open_store(run_dir: Path) -> Path:
    top = run_dir.absolute() / STORE_DIR
    run_dir.mkdir(parents=True, exist_ok=True)
    private_dir(top)
    store = top / LAYOUT
    private_dir(store)
    for sub in ("objects", "tmp"):
        (store / sub).mkdir(mode=0o700, exist_ok=True)
    return store


def object_path(store: Path, oid: str) -> Path:
    return store / "objects" / oid[:2] / oid[2:]


def have(store: Path, oid: str, size: int) -> bool:
    """Whether the store holds `oid`: a regular file of the owner's, of the expected size."""
    try:
        st = os.lstat(object_path(store, oid))
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_size == size


def changed(source: Path) -> SpecError:
    return SpecError(f"snapshot: {source} changed while it was being snapshotted; submit again")


def hash_file(source: Path, size: int) -> str:
    """The git blob id of `source`'s `size` bytes, read in chunks (never whole)."""
    h = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    try:
        fd = safeio.open_read(source)
    except OSError as err:
        raise SpecError(f"snapshot: cannot read {source}: {err.strerror or err}") from err
    try:
        done = 0
        while chunk := os.read(fd, min(CHUNK, size - done) or 1):
            done += len(chunk)
            if done > size:
                raise changed(source)
            h.update(chunk)
    finally:
        os.close(fd)
    if done != size:
        raise changed(source)
    return h.hexdigest()


def copy_hashing(src: int, dst: int, source: Path, size: int) -> str:
    """Copy `size` bytes from `src` to `dst`, hashing what is written; a read error names the source."""
    h = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    done = 0
    while True:
        try:
            chunk = os.read(src, min(CHUNK, size - done) or 1)
        except OSError as err:
            raise SpecError(f"snapshot: cannot read {source}: {err.strerror or err}") from err
        if not chunk:
            break
        done += len(chunk)
        if done > size:
            raise changed(source)
        h.update(chunk)
        safeio.write_all(dst, chunk)
    if done != size:
        raise changed(source)
    return h.hexdigest()


def put(store: Path, source: Path, size: int) -> str:
    """Store `source`'s bytes; returns the id of the bytes as written. On any failure (a full disk) the partial
    file is removed and the error names the store."""
    try:
        src = safeio.open_read(source)
    except OSError as err:
        raise SpecError(f"snapshot: cannot read {source}: {err.strerror or err}") from err
    part = store / "tmp" / uuid.uuid4().hex
    try:
        dst = safeio.open_fd(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        try:
            oid = copy_hashing(src, dst, source, size)
        finally:
            os.close(dst)
        obj = object_path(store, oid)
        obj.parent.mkdir(mode=0o700, exist_ok=True)
        part.replace(obj)
        return oid
    except OSError as err:
        raise SpecError(
            f"snapshot: writing to the code snapshot store {store} failed: {err.strerror or err} (the partial "
            "file was removed); free space there, or set snapshot: off"
        ) from err
    finally:
        os.close(src)
        part.unlink(missing_ok=True)


def receive(store: Path, src: int, oid: str, size: int) -> None:
    """Store exactly `size` bytes read from the stream `src` (objects sent by another host, one after another)
    under `oid`; refused unless the bytes as written hash to `oid`, so a sender cannot plant a wrong object."""
    part = store / "tmp" / uuid.uuid4().hex
    h = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False)
    try:
        dst = safeio.open_fd(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        try:
            done = 0
            while done < size:
                chunk = os.read(src, min(CHUNK, size - done))
                if not chunk:
                    raise SpecError(f"snapshot: object {oid} ended after {done} of {size} bytes (connection lost?)")
                done += len(chunk)
                h.update(chunk)
                safeio.write_all(dst, chunk)
        finally:
            os.close(dst)
        if h.hexdigest() != oid:
            raise SpecError(f"snapshot: the bytes sent as object {oid} hash to {h.hexdigest()}: refused")
        obj = object_path(store, oid)
        obj.parent.mkdir(mode=0o700, exist_ok=True)
        part.replace(obj)
    finally:
        part.unlink(missing_ok=True)


def publish_tree(made: Path, final: Path) -> None:
    """Move a fully written tree into place; one published meanwhile (the same content) wins, ours goes."""
    try:
        made.replace(final)
    except OSError:
        if not final.is_dir():
            raise
        import shutil

        shutil.rmtree(made, ignore_errors=True)
