"""Building a manifest: `git_manifest` (git mode) and `dir_manifest` (dir mode), and the rules both share.

- Links whose target lies inside the snapshot's root stay links (made relative, so they point inside the
  snapshot, not back at the live tree). A relative link leaving the root (`lib -> ../shared_lib`) is snapshotted
  as its content (a directory is walked like dir mode's, bounded by the same limits); an absolute link leaving
  it (`data -> /datasets/x`) stays a link, meaning what it means at submit (data is not pinned); a link leaving
  the root to nothing is refused with its path.
- dir mode leaves out hidden files and directories, `__pycache__`, what `.gitignore` files ignore, and
  data-like files (`DATA_SUFFIXES`, or over `DATA_FILE_BYTES`) unless a `!glob` in `snapshot_exclude` lists
  them; hidden and data-like files are named in `Manifest.left_out`.
- Both modes leave out the spec's run_dir and checkpoint dir and what `snapshot_exclude` matches.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl.errors import SpecError
from ddpctl.snapshot import ignore
from ddpctl.snapshot.collect import (
    GIT_KINDS,
    LINK,
    SKIP_DIRS,
    SUBMODULE,
    Entry,
    Limits,
    Manifest,
    MiB,
    check_name,
    git_lists,
    kind_of,
    parse_ls_files,
    parse_status,
    too_big,
)

DATA_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".npy", ".npz")
DATA_FILE_BYTES = 16 * MiB
MAX_IGNORE_BYTES = 1 << 20  # a .gitignore larger than this is read up to it


@dataclass
class Walk:
    manifest: Manifest
    excluded: list[Path]  # resolved directories never part of a snapshot (run_dir, checkpoint dir)
    patterns: list[ignore.Rule]  # snapshot_exclude
    gitignore: bool = False  # dir mode: honour .gitignore files
    entered: set[str] = field(default_factory=set)  # real directories walked (a link loop ends here)

    @property
    def root(self) -> Path:
        return self.manifest.root


def inside(path: Path | str, top: Path | str) -> bool:
    path, top = str(path), str(top)
    return path == top or path.startswith(top.rstrip("/") + "/")


def walker(root: Path, exclude: list[Path], patterns: list[str], limits: Limits, gitignore: bool) -> Walk:
    real = Path(os.path.realpath(root))
    manifest = Manifest(real, limits)
    rules = ignore.parse(patterns)
    return Walk(manifest, [Path(os.path.realpath(p)) for p in exclude], rules, gitignore)


def dir_manifest(root: Path, exclude: list[Path], patterns: list[str], limits: Limits) -> Manifest:
    w = walker(root, exclude, patterns, limits, gitignore=True)
    walk_dir(w, w.root, "", [])
    return w.manifest


def read_ignore(w: Walk, top: Path, prefix: str) -> list[ignore.Rule]:
    if not w.gitignore:
        return []
    try:
        with (top / ".gitignore").open("rb") as handle:
            text = handle.read(MAX_IGNORE_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    return ignore.parse(text.splitlines(), prefix.rstrip("/"))


def walk_dir(w: Walk, top: Path, prefix: str, rules: list[ignore.Rule]) -> None:
    """Add what `top` holds under `prefix` ("" or "a/b/"), in name order."""
    w.entered.add(os.path.realpath(top))
    rules = rules + read_ignore(w, top, prefix)
    try:
        listing = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError as err:
        raise SpecError(f"snapshot: cannot list {top}: {err.strerror or err}") from err
    for item in listing:
        rel = prefix + item.name
        check_name(w.root, rel)
        is_dir = item.is_dir(follow_symlinks=False)
        listed = ignore.verdict(w.patterns, rel, is_dir)
        if listed or (listed is None and ignore.verdict(rules, rel, is_dir)):
            continue
        if item.name.startswith(".") and listed is None:
            if not is_dir:
                w.manifest.left_out.append(f"{rel} (hidden)")
            continue
        if is_dir and (item.name in SKIP_DIRS or any(inside(os.path.realpath(item.path), e) for e in w.excluded)):
            continue
        if item.is_symlink():
            add_link(w, rel, Path(item.path))
        elif is_dir:
            walk_dir(w, Path(item.path), rel + "/", rules)
        elif item.is_file(follow_symlinks=False):
            add_file(w, rel, Path(item.path), item.stat(follow_symlinks=False), listed is False)


def data_like(rel: str, size: int) -> str | None:
    if rel.lower().endswith(DATA_SUFFIXES):
        return f"data-like: *{Path(rel).suffix}"
    if size > DATA_FILE_BYTES:
        return f"data-like: {size / MiB:.0f} MB > {DATA_FILE_BYTES // MiB} MB"
    return None


def add_file(w: Walk, rel: str, path: Path, st: os.stat_result, listed: bool) -> None:
    """A file found by a directory walk: data-like ones are left out unless listed explicitly."""
    if not listed and (why := data_like(rel, st.st_size)):
        w.manifest.left_out.append(f"{rel} ({why})")
        return
    source = "" if path == w.root / rel else str(path)
    w.manifest.add(Entry(rel, kind_of(st), stat.S_IMODE(st.st_mode), st.st_size, source=source))


def add_link(w: Walk, rel: str, path: Path) -> None:
    target = str(path.readlink())
    real = Path(os.path.realpath(path))
    if inside(real, w.root):
        if real.exists():  # point inside the snapshot, however the link was written
            target = os.path.relpath(real.relative_to(w.root), rel.rpartition("/")[0] or ".")
        w.manifest.add(Entry(rel, LINK, 0, 0, target=target))
    elif not real.exists():
        raise SpecError(
            f"snapshot: {path} is a symbolic link to {target!r}, outside {w.root}, and nothing is there: "
            f"remove it, point it inside {w.root}, or leave it out (snapshot_exclude)"
        )
    elif Path(target).is_absolute():  # means the same from the snapshot; data behind it is not the code's to pin
        w.manifest.add(Entry(rel, LINK, 0, 0, target=target))
    elif real.is_dir():
        if str(real) in w.entered:
            raise SpecError(f"snapshot: {path} -> {target!r} leads back into a directory already snapshotted")
        walk_dir(w, real, rel + "/", [])
    else:
        add_file(w, rel, real, real.stat(), ignore.verdict(w.patterns, rel, False) is False)


def git_manifest(root: Path, exclude: list[Path], patterns: list[str], limits: Limits) -> Manifest:
    """The repository's files as its work tree holds them: tracked ones (uncommitted changes included) and
    untracked ones git does not ignore, but not files outside a sparse checkout."""
    w = walker(root, exclude, patterns, limits, gitignore=False)
    status, listed = git_lists(w.root, w.excluded)
    m = w.manifest
    m.commit, m.branch, changed, m.dirty = parse_status(status)
    tracked = list(parse_ls_files(listed))
    known = {t[3] for t in tracked}
    untracked = sorted(p for p in changed if p not in known)
    if len(tracked) + len(untracked) > limits.max_files:  # counted before a single file is looked at
        raise too_big(m, f"{len(tracked) + len(untracked)} files")
    chosen: dict[str, str | None] = {}
    for tag, mode, oid, path in tracked:
        if mode == SUBMODULE:
            m.skipped.append(path)
        elif mode in GIT_KINDS:
            chosen[path] = oid if tag == "H" and path not in changed and mode != "120000" else None
    chosen.update(dict.fromkeys(untracked))
    for path in sorted(chosen):
        check_name(w.root, path)
        if not ignore.excluded_path(w.patterns, path):
            add_git_path(w, path, chosen[path])
    return m


def add_git_path(w: Walk, rel: str, oid: str | None) -> None:
    path = w.root / rel
    try:
        st = path.lstat()
    except FileNotFoundError:  # deleted in the work tree, or outside a sparse checkout: not there to run
        return
    if stat.S_ISLNK(st.st_mode):
        add_link(w, rel, path)
    elif stat.S_ISREG(st.st_mode):
        w.manifest.add(Entry(rel, kind_of(st), stat.S_IMODE(st.st_mode), st.st_size, oid=oid))
    elif stat.S_ISDIR(st.st_mode):  # an untracked nested repository
        w.manifest.skipped.append(rel.rstrip("/"))
