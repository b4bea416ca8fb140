"""The laptop's half of `submit --cluster`: the code snapshot taken here, only the objects the cluster lacks
sent over the cluster's one connection, then the cluster's ddpctl submits (ddpctl.cli.remote_internal).

The snapshot is taken as `submit` takes it (ddpctl.snapshot: the script's git work tree, or its directory)
into a local cache store (`<ddpctl home>/remote-cache/.snapshots/`), so what is sent is exactly what was
hashed. Three remote commands, each one round trip over the shared connection: `code-missing` (which ids
the cluster lacks, and its ddpctl version), `code-put` (only when some are missing) and `remote-submit`.
The submission carries a tag: when the connection drops before the answer, the same request is sent again
with the same tag and the cluster answers the outcome of the first one (never a second job).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpctl.errors import RemoteError, SpecError
from ddpctl.proc import Completed
from ddpctl.remote.check import install_hint
from ddpctl.remote.profiles import Cluster
from ddpctl.remote.receive import header
from ddpctl.remote.ssh import command_missing
from ddpctl.remote.transport import Transport
from ddpctl.run.registry import registry_home
from ddpctl.sanitize import visible
from ddpctl.snapshot.collect import LINK
from ddpctl.snapshot.copy import Resolved, resolve
from ddpctl.snapshot.store import object_path, open_store

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec

RETRIES = 3  # a dropped connection during the submission: asked again (same tag) this many times
RETRY_PAUSE_S = 1.0


@dataclass(frozen=True)
class Code:
    resolved: Resolved
    store: Path
    spec_rel: str  # the spec file's place in the code tree: its relative paths start there, as here


@dataclass(frozen=True)
class Sent:
    objects: int
    bytes: int
    present: int  # objects the cluster had already


def local_code(spec: JobSpec, env: Mapping[str, str] | None = None) -> Code:
    from ddpctl.snapshot import check

    preview = check(spec)
    if preview is None:
        raise SpecError(f"{spec.source}: snapshot: off: submit --cluster sends the code snapshot; expected auto")
    root = preview.manifest.root
    spec_rel = os.path.relpath(os.path.realpath(spec.source), root)
    if spec_rel.startswith(".."):
        raise SpecError(
            f"{spec.source}: submit --cluster needs the spec file inside the code it sends ({root}): its relative "
            "paths start at its place there; move it into that directory"
        )
    store = open_store(registry_home(os.environ if env is None else env) / "remote-cache")
    return Code(resolve(store, preview.manifest), store, Path(spec_rel).as_posix())


def listing(resolved: Resolved) -> list[list[Any]]:
    return [[i.path, i.kind, i.mode, i.ref, i.size] for i in resolved.items]


def remote_words(cluster: Cluster, *words: str) -> list[str]:
    return [*cluster.ddpctl, "internal", *words]


def checked(cluster: Cluster, done: Completed, local: str, step: str) -> Any:
    """The JSON a remote step printed, or one line: ddpctl missing there, too old to know the step, failed."""
    where = f"cluster {cluster.name!r}"
    if command_missing(done.returncode, done.stderr):
        raise RemoteError(f"{where}: no {visible(' '.join(cluster.ddpctl))!r} on {visible(cluster.ssh)}: "
                          f"{install_hint(local)}")  # fmt: skip
    if done.returncode == 2 and "invalid choice" in done.stderr:
        raise RemoteError(f"{where}: its ddpctl has no `internal {step}` (another version): {install_hint(local)}")
    said = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode != 0:
        last = visible(said[-1]).removeprefix("ddpctl: error: ") if said else f"exit status {done.returncode}"
        raise RemoteError(f"{where}: {step}: {last}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise RemoteError(f"{where}: {step}: no JSON answer: {visible(done.stdout[:80])!r}") from None


def sync(transport: Transport, code: Code, local: str) -> Sent:
    """Send the objects of the code tree the cluster lacks; an unchanged resubmit sends none."""
    cluster = transport.cluster
    sizes = {i.ref: i.size for i in code.resolved.items if i.kind != LINK}
    ask = json.dumps({"version": local, "objects": [[oid, size] for oid, size in sizes.items()]}).encode()
    answer = checked(cluster, transport.run(remote_words(cluster, "code-missing"), data=ask), local, "code-missing")
    there = answer.get("version") if isinstance(answer, dict) else None
    if there != local:
        shown = visible(str(there))
        raise RemoteError(f"cluster {cluster.name!r}: ddpctl {shown} there, {local} here: {install_hint(local)}")
    lacking = [oid for oid in answer.get("missing", []) if oid in sizes]
    if not lacking:
        return Sent(0, 0, len(sizes))
    stream = bytearray()
    for oid in lacking:
        stream += header(oid, sizes[oid])
        stream += object_path(code.store, oid).read_bytes()
    done = transport.run(remote_words(cluster, "code-put"), data=bytes(stream))
    stored = checked(cluster, done, local, "code-put")
    if stored != {"objects": len(lacking), "bytes": sum(sizes[o] for o in lacking)}:
        raise RemoteError(f"cluster {cluster.name!r}: code-put stored {visible(str(stored))}, not what was sent")
    return Sent(len(lacking), stored["bytes"], len(sizes) - len(lacking))


def submit_remote(transport: Transport, request: Mapping[str, Any], local: str, tag: str | None = None) -> Any:
    """The cluster's outcome of the submission request; asked again with the same tag if the connection drops."""
    tag = tag or uuid.uuid4().hex
    data = json.dumps(dict(request)).encode()
    words = remote_words(transport.cluster, "remote-submit", "--tag", tag)
    for attempt in range(RETRIES + 1):
        try:
            done = transport.run(words, in_workdir=True, data=data)
            break
        except RemoteError as err:
            if err.kind not in ("dropped", "") or attempt == RETRIES:
                raise RemoteError(f"{err}; the submission's outcome is kept there: submit again with --tag {tag} "
                                  "to learn it (never a second job)") from err  # fmt: skip
            time.sleep(RETRY_PAUSE_S)
    return checked(transport.cluster, done, local, "remote-submit")


def request_of(spec: JobSpec, code: Code, cluster: Cluster, overrides: Sequence[str], **extra: Any) -> dict[str, Any]:
    from ddpctl.safeio import read_bytes

    try:
        text = read_bytes(os.path.realpath(spec.source)).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{spec.source}: cannot read spec file: {err}") from err
    return {
        "tree": listing(code.resolved),
        "spec": code.spec_rel,
        "text": text,
        "defaults": dict(cluster.defaults),
        "overrides": list(overrides),
        **extra,
    }
