"""Bounding the cluster's code store (`<ddpctl home>/remote/`): every submit or preview of a changed tree adds a
tree and the objects it lacked, and nothing went (three dry runs of a 10 MB repository grew it to 68 MB).

After each request the store keeps: the tree just used, the trees live runs name (a run not ended whose job.yaml
names a tree: a container image or a data file in it, say), the KEEP_TREES trees used last, the objects those
trees hold (`git ls-files -s`: an object's id is its git blob id), and every object younger than GRACE_S (sent
for a submission not built yet: the laptop sends what the cluster lacks, then asks again). The rest goes, and
the request's answer says what was freed.

Requests hold the store's lock shared from "what is lacking" to the tree built; pruning takes it exclusively and
is skipped while any other request holds it, so nothing a request found present goes before its tree is built.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ddpctl import proc, safeio
from ddpctl.remote.trees import discard, trees_dir
from ddpctl.run import history
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord

KEEP_TREES = 3
GRACE_S = 3600.0
TREE_ID = re.compile(r"[0-9a-f]{64}")
NAMED = re.compile(r"trees/([0-9a-f]{64})")
SPEC_BYTES = 1 << 20
LOCK = "gc.lock"


@dataclass(frozen=True)
class Freed:
    trees: int
    objects: int
    bytes: int
    kept: int

    def line(self) -> str | None:
        if not (self.trees or self.objects):
            return None
        return (
            f"code store: freed {self.trees} code trees and {self.objects} objects ({self.bytes / 1e6:.1f} MB) on "
            f"the cluster; {self.kept} trees kept"
        )


@contextlib.contextmanager
def using(home: Path) -> Iterator[None]:
    """Held (shared) by a request from "what is lacking" to its tree built."""
    home.mkdir(parents=True, exist_ok=True)
    fd = safeio.open_fd(home / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def used_by_runs(records: Iterable[JobRecord]) -> set[str]:
    """The tree ids named in the job.yaml of the runs that have not ended."""
    found: set[str] = set()
    for record in records:
        layout = RunLayout(Path(record.run_dir))
        past = history.load(layout.events)
        state = past.final_state()
        if past.cancelled() or (state is not None and state.state != "REQUEUED"):
            continue  # ended: nothing of it runs again
        text = (safeio.read_bounded(layout.spec_file, SPEC_BYTES) or b"").decode(errors="replace")
        found.update(NAMED.findall(text))
    return found


def prune(home: Path, store: Path, keep: str, records: Iterable[JobRecord], now: float | None = None) -> Freed | None:
    """Prune the store (see the module's docstring); None when another request holds it (nothing pruned)."""
    fd = safeio.open_fd(home / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None
        return _prune(trees_dir(home), store, keep, records, time.time() if now is None else now)
    finally:
        os.close(fd)


def _prune(trees: Path, store: Path, keep: str, records: Iterable[JobRecord], now: float) -> Freed:
    entries = [(entry, entry.lstat().st_mtime) for entry in trees.iterdir()]
    built = sorted(((p, t) for p, t in entries if TREE_ID.fullmatch(p.name)), key=lambda pt: pt[1], reverse=True)
    wanted = {keep} | used_by_runs(records) | {p.name for p, _ in built[:KEEP_TREES]}
    gone = [p for p, _ in built if p.name not in wanted]
    gone += [p for p, t in entries if p.name.startswith((".tmp-", ".gone-")) and now - t > GRACE_S]  # crashed
    for path in gone:
        discard(path)
    held = objects_of([p for p, _ in built if p.name in wanted])
    count = size = 0
    if held is not None:  # a kept tree git could not list: no object is known unused
        count, size = _drop_objects(store, held, now)
    return Freed(sum(TREE_ID.fullmatch(p.name) is not None for p in gone), count, size, len(built) - len(gone))


def objects_of(trees: list[Path]) -> set[str] | None:
    """Every blob id the trees hold; None when git cannot say for one of them."""
    found: set[str] = set()
    for tree in trees:
        done = proc.run(["git", "-C", str(tree), "ls-files", "-s", "-z"], timeout=120)
        if done.returncode != 0:
            return None
        found.update(entry.split(" ")[1] for entry in done.stdout.split("\0") if entry.count(" ") >= 2)
    return found


def _drop_objects(store: Path, held: set[str], now: float) -> tuple[int, int]:
    count = size = 0
    for top in (store / "objects").iterdir():
        for path in top.iterdir():
            info = path.lstat()
            if top.name + path.name in held or now - info.st_mtime <= GRACE_S:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                count, size = count + 1, size + info.st_size
    return count, size
