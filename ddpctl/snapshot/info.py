"""Taking a run's snapshot at submit (`take`), checking one without copying (`check`, for `submit --dry-run`),
reading it back (`read_info`) and pinning the node to it (`pin`).

Modes (spec `snapshot`): `git` — the repository holding the script: tracked files as in the work tree (so
uncommitted changes included) plus untracked files git does not ignore; `dir` — the script's directory (hidden,
ignored and data-like files left out, `ddpctl.snapshot.walk`); `auto` — `git` when the script is in a git work
tree and git is installed, else `dir`; `off` — no snapshot, every attempt runs whatever the script path holds
when it starts. The spec's run_dir and checkpoint dir, and what `snapshot_exclude` matches, are never part of a
snapshot. Each run gets its own copy of the code (`code/` in its run dir, `ddpctl.run.layout`).
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
from ddpctl.snapshot.collect import Limits, Manifest, MiB, git_root
from ddpctl.snapshot.copy import Resolved, materialise, resolve
from ddpctl.snapshot.store import open_store
from ddpctl.snapshot.walk import dir_manifest, git_manifest
from ddpctl.spec import JobSpec

MODES = ("auto", "git", "dir", "off")
SHOWN = 5  # left-out names on submit's line; snapshot.json has them all


@dataclass(frozen=True)
class SnapshotInfo:
    mode: str  # git or dir (what auto chose)
    source: str  # the repository root or directory the snapshot was taken of
    tree: str  # content id of the snapshot (its listing: paths, kinds, modes, content ids)
    path: str  # the run's copy of the code (relative to the run dir in snapshot.json)
    script: str  # the spec's script inside it (likewise)
    files: int
    bytes: int
    new_bytes: int  # stored by this submit
    commit: str | None = None
    branch: str | None = None
    dirty: bool = False
    skipped: tuple[str, ...] = ()  # git submodules, nested repositories (not snapshotted)
    left_out: tuple[str, ...] = ()  # "path (why)": hidden and data-like files of dir mode


@dataclass(frozen=True)
class Preview:
    """What `take` would do, checked without copying: for `submit --dry-run`."""

    mode: str
    manifest: Manifest
    script_rel: str  # the script's path inside the run's copy


def check(spec: JobSpec, limits: Limits | None = None) -> Preview | None:
    """Every check `take` makes before it copies (mode, limits, names, links, the script being part of it);
    None for `snapshot: off`."""
    if spec.snapshot == "off":
        return None
    limits = limits or Limits.from_env(os.environ)
    script = Path(os.path.realpath(spec.script))
    mode, manifest = manifest_of(spec, script, limits)
    rel = os.path.relpath(script, manifest.root)
    if not any(e.path == rel for e in manifest.entries):
        raise SpecError(
            f"{spec.source}: snapshot: the script {spec.script} is not part of the snapshot of "
            f"{manifest.root} (ignored by git or snapshot_exclude, hidden, or inside run_dir?); "
            "expected snapshot: dir or off, or list it with !glob in snapshot_exclude"
        )
    return Preview(mode, manifest, rel)


def take(spec: JobSpec, record: Path, code: Path, limits: Limits | None = None) -> SnapshotInfo | None:
    """Snapshot the spec's code into the store and the run's own copy `code`, and write the record `record`
    (both in the staging run dir, `ddpctl.run.layout`); None for `snapshot: off`."""
    return take_each(spec, [(record, code)], limits)[0]


def take_each(spec: JobSpec, runs: list[tuple[Path, Path]], limits: Limits | None = None) -> list[SnapshotInfo | None]:
    """`take` for several runs of one code (a sweep's tasks): listed and stored once, and each (record, code)
    gets its own copy, so nothing one run writes beside its script reaches another."""
    preview = check(spec, limits)
    if preview is None:
        return [None for _ in runs]
    store = open_store(Path(spec.run_dir))
    resolved = resolve(store, preview.manifest)
    out: list[SnapshotInfo | None] = []
    for record, code in runs:
        materialise(store, resolved, code)
        out.append(_record(preview, resolved, record, code))
    return out


def _record(preview: Preview, resolved: Resolved, record: Path, code: Path) -> SnapshotInfo:
    manifest = preview.manifest
    where = os.path.relpath(code, record.parent)
    info = SnapshotInfo(
        mode=preview.mode,
        source=str(manifest.root),
        tree=resolved.tree_id,
        path=where,
        script=f"{where}/{preview.script_rel}",
        files=resolved.files,
        bytes=resolved.bytes,
        new_bytes=resolved.new_bytes,
        commit=manifest.commit,
        branch=manifest.branch,
        dirty=manifest.dirty,
        skipped=tuple(manifest.skipped),
        left_out=tuple(manifest.left_out),
    )
    safeio.write_text_atomic(record, json.dumps(dataclasses.asdict(info), indent=1) + "\n")
    return absolute(info, record.parent)


def manifest_of(spec: JobSpec, script: Path, limits: Limits) -> tuple[str, Manifest]:
    """("git", the script's repository) or ("dir", the script's directory), as the spec's `snapshot` asks."""
    exclude = [Path(spec.run_dir), *([Path(spec.checkpoint.dir)] if spec.checkpoint.dir else [])]
    patterns = list(spec.snapshot_exclude)
    root = git_root(script.parent) if spec.snapshot in ("auto", "git") else None
    if spec.snapshot == "git" and root is None:
        raise SpecError(
            f"{spec.source}: snapshot: git, but the script {spec.script} is not in a git work tree "
            "(or git is not installed); expected snapshot: dir, auto or off"
        )
    if root is not None:
        return "git", git_manifest(root, exclude, patterns, limits)
    return "dir", dir_manifest(script.parent, exclude, patterns, limits)


def absolute(info: SnapshotInfo, run_dir: Path) -> SnapshotInfo:
    """Paths in the record are relative to the run dir (it is renamed after the snapshot is taken)."""
    return dataclasses.replace(info, path=str(run_dir / info.path), script=str(run_dir / info.script))


def read_info(record: Path) -> SnapshotInfo | None:
    """A run's snapshot record, paths made absolute; None when the run has none (snapshot: off)."""
    try:
        data: Any = json.loads(record.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fields = {f.name for f in dataclasses.fields(SnapshotInfo)}
    try:
        kwargs: dict[str, Any] = {
            k: (tuple(v) if k in ("skipped", "left_out") else v) for k, v in data.items() if k in fields
        }
        return absolute(SnapshotInfo(**kwargs), record.parent)
    except TypeError:
        return None


def pin(spec: JobSpec, record: Path) -> JobSpec:
    """The spec as an attempt runs it: the script in the run's copy of the code (a missing copy is an error,
    never a silent fall-back to the live code)."""
    info = read_info(record)
    if info is None:
        return spec
    if not Path(info.script).is_file():
        raise SpecError(
            f"snapshot: {info.script} is missing (was {info.path} removed?); "
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


def left_out_lines(skipped: tuple[str, ...] | list[str], left_out: tuple[str, ...] | list[str]) -> list[str]:
    """What is not in the snapshot, for `submit` (and its dry run): submodules, hidden and data-like files."""
    lines = []
    for label, names in (("not snapshotted (git submodules)", skipped), ("left out", left_out)):
        if names:
            more = f", and {len(names) - SHOWN} more (snapshot.json)" if len(names) > SHOWN else ""
            lines.append(f"          {label}: {', '.join(names[:SHOWN])}{more}")
    return lines
