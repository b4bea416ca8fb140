"""Taking a run's snapshot at submit (`take`), reading it back (`read_info`) and pinning the node to it (`pin`).

Modes (spec `snapshot`): `git` — the repository holding the script: tracked files as in the work tree (so
uncommitted changes included) plus untracked files git does not ignore; `dir` — the script's directory, all of
it; `auto` — `git` when the script is in a git work tree and git is installed, else `dir`; `off` — no snapshot,
every attempt runs whatever the script path holds when it starts. The spec's run_dir and checkpoint dir are never
part of a snapshot.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.errors import SpecError
from ddpctl.snapshot.collect import Manifest, dir_manifest, git_manifest, git_root
from ddpctl.snapshot.store import Limits, MiB, store_tree, too_big
from ddpctl.spec import JobSpec

MODES = ("auto", "git", "dir", "off")
STORE_DIR = ".snapshots"


@dataclass(frozen=True)
class SnapshotInfo:
    mode: str  # git or dir (what auto chose)
    source: str  # the repository root or directory the snapshot was taken of
    tree: str  # content id of the snapshot
    path: str  # the snapshot's directory
    script: str  # the spec's script inside the snapshot
    files: int
    bytes: int
    new_bytes: int  # copied by this submit
    commit: str | None = None
    branch: str | None = None
    dirty: bool = False
    skipped: tuple[str, ...] = ()  # e.g. submodules (not snapshotted)


def take(spec: JobSpec, record: Path, limits: Limits | None = None) -> SnapshotInfo | None:
    """Snapshot the spec's code and write its record to `record` (the staging run dir's snapshot.json, see
    `ddpctl.run.layout`); None for `snapshot: off`."""
    if spec.snapshot == "off":
        return None
    limits = limits or Limits.from_env(os.environ)
    script = Path(os.path.realpath(spec.script))
    mode, manifest = manifest_of(spec, script, limits)
    if manifest.truncated:  # the directory walk stopped at a limit
        raise too_big(manifest, len(manifest.entries), limits.max_bytes, limits)
    rel = script.relative_to(manifest.root).as_posix()
    if not any(e.path == rel for e in manifest.entries):
        raise SpecError(
            f"{spec.source}: snapshot: the script {spec.script} is not part of the snapshot of "
            f"{manifest.root} (ignored by git, or inside run_dir?); expected snapshot: dir or off"
        )
    stored = store_tree(Path(spec.run_dir) / STORE_DIR, manifest, limits)
    info = SnapshotInfo(
        mode=mode,
        source=str(manifest.root),
        tree=stored.tree_id,
        path=str(stored.path),
        script=str(stored.path / rel),
        files=stored.files,
        bytes=stored.bytes,
        new_bytes=stored.new_bytes,
        commit=manifest.commit,
        branch=manifest.branch,
        dirty=manifest.dirty,
        skipped=tuple(manifest.skipped),
    )
    safeio.write_text_atomic(record, json.dumps(dataclasses.asdict(info), indent=1) + "\n")
    return info


def manifest_of(spec: JobSpec, script: Path, limits: Limits) -> tuple[str, Manifest]:
    """("git", the script's repository) or ("dir", the script's directory), as the spec's `snapshot` asks."""
    exclude = [Path(spec.run_dir), *([Path(spec.checkpoint.dir)] if spec.checkpoint.dir else [])]
    root = git_root(script.parent) if spec.snapshot in ("auto", "git") else None
    if spec.snapshot == "git" and root is None:
        raise SpecError(
            f"{spec.source}: snapshot: git, but the script {spec.script} is not in a git work tree "
            "(or git is not installed); expected snapshot: dir, auto or off"
        )
    if root is not None:
        return "git", git_manifest(Path(os.path.realpath(root)), exclude)
    return "dir", dir_manifest(script.parent, exclude, limits.max_files, limits.max_bytes)


def read_info(record: Path) -> SnapshotInfo | None:
    """A run's snapshot record; None when the run has none (snapshot: off, or submitted before snapshots)."""
    try:
        data: Any = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fields = {f.name for f in dataclasses.fields(SnapshotInfo)}
    try:
        kwargs: dict[str, Any] = {k: (tuple(v) if k == "skipped" else v) for k, v in data.items() if k in fields}
        return SnapshotInfo(**kwargs)
    except TypeError:
        return None


def pin(spec: JobSpec, record: Path) -> JobSpec:
    """The spec as an attempt runs it: the script inside the run's snapshot (a missing snapshot is an error,
    never a silent fall-back to the live code)."""
    info = read_info(record)
    if info is None:
        return spec
    if not Path(info.script).is_file():
        raise SpecError(
            f"snapshot: {info.script} is missing (was {Path(info.path).parent} removed?); "
            "the run cannot continue with the code it was submitted with"
        )
    return dataclasses.replace(spec, script=info.script)


def summary(info: SnapshotInfo | None) -> str:
    """One line for `submit` and `status`."""
    if info is None:
        return "code: not snapshotted (snapshot: off): each attempt runs the script as it is then"
    size = f"{info.files} files, {info.bytes / MiB:.1f} MB ({info.new_bytes / MiB:.1f} MB new)"
    if info.mode == "git":
        commit = info.commit[:12] if info.commit else "no commit yet"
        where = f"git {commit}" + (f" on {info.branch}" if info.branch else " (detached)")
        state = "dirty: uncommitted changes included" if info.dirty else "clean"
        return f"code: {where}, {state}; snapshot {info.tree[:12]}: {size}"
    return f"code: directory {info.source}; snapshot {info.tree[:12]}: {size}"
