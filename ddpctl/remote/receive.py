"""The cluster's side of `submit --cluster`: objects received into a private store, the code tree built from
them, the spec read as the laptop reads it, and each submission's outcome kept under its tag.

    <ddpctl home>/remote/.snapshots/v2/   the received objects (ddpctl.snapshot.store: private, content-addressed)
    <ddpctl home>/remote/trees/<tree id>/ the code as the laptop snapshotted it (ddpctl.remote.trees)
    <ddpctl home>/remote/submits/<tag>    the outcome of the submission tagged <tag> (JSON), and its lock
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ddpctl import safeio
from ddpctl.errors import SpecError
from ddpctl.run.registry import registry_home
from ddpctl.snapshot.collect import LINK
from ddpctl.snapshot.copy import Item
from ddpctl.snapshot.store import have, open_store, receive

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec
    from ddpctl.spec.sweepload import Sweep
    from ddpctl.spec.yamldoc import Doc

OID_RE = re.compile(r"[0-9a-f]{40}")
TAG_RE = re.compile(r"[0-9a-f]{32}")
MAX_OBJECT = 1 << 30  # the snapshot's own limits are lower; a header beyond this is not one
MAX_REQUEST = 64 << 20  # the JSON of a tree listing and a spec


@dataclass(frozen=True)
class Header:
    oid: str
    size: int


def parse_header(line: bytes) -> Header:
    """One object's header in the stream `code-put` reads: b"<40 hex id> <size>\\n"."""
    parts = line.rstrip(b"\n").split(b" ")
    if len(parts) != 2 or not OID_RE.fullmatch(parts[0].decode("ascii", "replace")) or not parts[1].isdigit():
        raise SpecError(f"code-put: expected '<object id> <size>', got {line[:100]!r}")
    size = int(parts[1])
    if size > MAX_OBJECT:
        raise SpecError(f"code-put: object of {size} bytes, at most {MAX_OBJECT}")
    return Header(parts[0].decode(), size)


def header(oid: str, size: int) -> bytes:
    return f"{oid} {size}\n".encode()


def home(env: Mapping[str, str] | None = None) -> Path:
    return registry_home(os.environ if env is None else env) / "remote"


def store_of(env: Mapping[str, str] | None = None) -> Path:
    return open_store(home(env))


def missing(store: Path, wanted: Sequence[Sequence[Any]]) -> list[str]:
    """The ids among `wanted` ([id, size] pairs) the store lacks."""
    out = []
    for oid, size in wanted:
        if not (isinstance(oid, str) and OID_RE.fullmatch(oid) and isinstance(size, int) and size >= 0):
            raise SpecError(f"code-missing: expected [object id, size], got {[oid, size]!r}"[:200])
        if not have(store, oid, size) and oid not in out:
            out.append(oid)
    return out


def read_line(fd: int) -> bytes:
    line = b""
    while not line.endswith(b"\n") and len(line) < 128:
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line


def receive_all(store: Path, fd: int) -> tuple[int, int]:
    """Every object of the stream on `fd` into the store; (objects, bytes)."""
    count = total = 0
    while line := read_line(fd):
        head = parse_header(line)
        receive(store, fd, head.oid, head.size)
        count, total = count + 1, total + head.size
    return count, total


def items_of(listing: Sequence[Sequence[Any]]) -> list[Item]:
    """The tree listing sent by the laptop ([path, kind, mode, id or link target, size] each), checked: no path
    leaves the tree, links included (nothing is written under a link, and a relative link points inside)."""
    items = []
    links: set[str] = set()
    seen: set[str] = set()
    for row in listing:
        path, kind, mode, ref, size = row
        parts = PurePosixPath(path).parts
        if not parts or path.startswith("/") or any(p in ("..", ".", ".git") for p in parts) or "\x00" in path:
            raise SpecError(f"remote submit: refused tree path {path!r}")
        if path in seen or any("/".join(parts[:n]) in links for n in range(1, len(parts))):
            raise SpecError(f"remote submit: refused tree path {path!r}: listed twice, or under a link")
        seen.add(path)
        if kind == LINK:
            links.add(path)
            if not isinstance(ref, str) or not link_stays(path, ref):
                raise SpecError(f"remote submit: refused link {path!r} -> {ref!r}: it leaves the tree")
        elif not OID_RE.fullmatch(ref):
            raise SpecError(f"remote submit: {path!r}: expected an object id, got {ref!r}")
        items.append(Item(path, kind, int(mode) & 0o777, ref, int(size)))
    return items


def link_stays(path: str, target: str) -> bool:
    """Whether a link's target means a place inside the tree, as the laptop's snapshot makes relative links
    (ddpctl.snapshot.walk); an absolute one (data: `data -> /datasets/x`) is kept as the user wrote it."""
    if not target or "\x00" in target:
        return False
    if target.startswith("/"):
        return True
    where = os.path.normpath(PurePosixPath(path).parent / target)
    return where != ".." and not where.startswith("../") and ".git" not in PurePosixPath(where).parts


def outcome_path(tag: str, env: Mapping[str, str] | None = None) -> Path:
    if not TAG_RE.fullmatch(tag):
        raise SpecError(f"remote submit: tag {tag!r}: expected 32 hex digits")
    where = home(env) / "submits"
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    return where / tag


def read_outcome(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(safeio.read_bytes(path))
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


def write_outcome(path: Path, outcome: Mapping[str, Any]) -> None:
    safeio.write_text_atomic(path, json.dumps(dict(outcome)) + "\n")


def remote_spec(
    code: Path, spec_rel: str, text: str, defaults: Mapping[str, Any], overrides: Sequence[str], *, cwd: Path
) -> JobSpec:
    """The spec as the laptop wrote it, read as if from its place in the code tree (so `script: train.py`
    means the same file), with the cluster's defaults under it. Data paths stay on the cluster: a relative
    run_dir or checkpoint.dir starts at the remote work directory (the profile's workdir), not in the tree."""
    from ddpctl.spec.load import build_from_doc
    from ddpctl.spec.overrides import apply_override

    doc = remote_doc(code, spec_rel, text, defaults)
    for override in overrides:
        apply_override(doc, override)
    spec = build_from_doc(doc, doc.source, cwd=cwd)
    return on_cluster(spec, code, Path(doc.source).parent, cwd, doc.overridden)


def remote_sweep(code: Path, request: Mapping[str, Any], overrides: Sequence[str], *, cwd: Path) -> Sweep:
    """`remote_spec` of a sweep (`sweep --cluster`): the laptop's spec file and axes (request["sweep"]: grid,
    zip, max_parallel, name), every point's data paths kept on the cluster as a job's are."""
    from ddpctl.spec.sweepload import load_sweep

    axes = request.get("sweep") or {}
    doc = remote_doc(code, request["spec"], request["text"], request.get("defaults") or {})
    parallel = axes.get("max_parallel")
    loaded = load_sweep(
        doc.source,
        overrides,
        doc=doc,
        grid=[str(word) for word in axes.get("grid") or []],
        zipped=[str(word) for word in axes.get("zip") or []],
        max_parallel=parallel if isinstance(parallel, int) and not isinstance(parallel, bool) else None,
        name=str(axes["name"]) if axes.get("name") is not None else None,
        cwd=cwd,
    )
    set_keys = {tuple(part.strip() for part in word.partition("=")[0].split(".")) for word in overrides}
    folder = Path(doc.source).parent

    def here(spec: JobSpec) -> JobSpec:
        return on_cluster(spec, code, folder, cwd, lambda key: any(key[:n] in set_keys for n in range(1, 3)))

    points = tuple((point, here(spec)) for point, spec in loaded.points)
    return dataclasses.replace(loaded, spec=here(loaded.spec), points=points)


def remote_doc(code: Path, spec_rel: str, text: str, defaults: Mapping[str, Any]) -> Doc:
    """The laptop's spec text as a document read from its place in the code tree, the cluster's defaults under it."""
    from ddpctl.remote.profiles import with_defaults
    from ddpctl.spec.yamldoc import At, Doc, parse_yaml

    parts = PurePosixPath(spec_rel).parts
    if not parts or spec_rel.startswith("/") or ".." in parts:
        raise SpecError(f"remote submit: refused spec path {spec_rel!r}")
    doc = Doc(str(code / spec_rel), {})
    root = parse_yaml(text, doc, ())
    if not isinstance(root, dict):
        raise At(doc).fail(root, "a mapping of spec keys (name: ..., script: ...)", typed=True)
    doc.data = with_defaults(root, defaults)
    return doc


def on_cluster(
    spec: JobSpec, code: Path, folder: Path, cwd: Path, overridden: Callable[[tuple[str, ...]], bool]
) -> JobSpec:
    """The spec with its relative data paths moved out of the code tree to the remote work directory (the
    code tree is content-addressed and shared: runs must not write into it), and no cluster of its own. The
    spec as it stands here (the profile's defaults under it) must snapshot: `off` would run the shared tree."""
    from ddpctl.spec.paths import with_values

    if spec.snapshot == "off":
        raise SpecError(
            f"{spec.source}: snapshot: off (the spec's, an override's or the cluster profile's default): submit "
            "--cluster runs each job from its own copy of the code sent; expected auto, git or dir"
        )

    moved: dict[tuple[str, ...], str] = {}
    keys: list[tuple[tuple[str, ...], str | None]] = [(("run_dir",), spec.run_dir)]
    keys.append((("checkpoint", "dir"), spec.checkpoint.dir))
    for key, value in keys:
        if value is not None and Path(value).is_relative_to(code) and not overridden(key):
            moved[key] = os.path.normpath(cwd / os.path.relpath(value, folder))
    spec = with_values(spec, moved) if moved else spec
    return dataclasses.replace(spec, cluster=None)  # chosen on the laptop: here it is submitted here
