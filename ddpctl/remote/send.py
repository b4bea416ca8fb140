"""The laptop's half of `submit --cluster`: the code snapshot taken here, only the objects the cluster lacks
sent over the cluster's one connection, then the cluster's ddpctl submits (ddpctl.cli.remote_internal).

The snapshot is taken as `submit` takes it (ddpctl.snapshot: the script's git work tree, or its directory)
into a local cache store (`<ddpctl home>/remote-cache/.snapshots/`), so what is sent is exactly what was
hashed. The submission is asked for first (`remote-submit`, one round trip over the shared connection); when the
cluster lacks objects of the tree it says which, they are sent in one stream (`code-put`) and the submission is
asked for again: an unchanged resubmit sends nothing and costs one round trip.
The submission carries a tag: when the connection drops before the answer, the same request is sent again
with the same tag and the cluster answers the outcome of the first one (never a second job).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
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


def send(transport: Transport, code: Code, lacking: Sequence[str], local: str) -> Sent:
    """Send the objects of the code tree the cluster said it lacks, in one stream."""
    cluster = transport.cluster
    sizes = {i.ref: i.size for i in code.resolved.items if i.kind != LINK}
    wanted = [oid for oid in dict.fromkeys(lacking) if oid in sizes]
    if len(wanted) != len(lacking):
        raise RemoteError(f"cluster {cluster.name!r}: asked for objects that are not in the code sent")
    stream = bytearray()
    for oid in wanted:
        stream += header(oid, sizes[oid])
        stream += object_path(code.store, oid).read_bytes()
    stored = checked(cluster, transport.run(remote_words(cluster, "code-put"), data=bytes(stream)), local, "code-put")
    if stored != {"objects": len(wanted), "bytes": sum(sizes[o] for o in wanted)}:
        raise RemoteError(f"cluster {cluster.name!r}: code-put stored {visible(str(stored))}, not what was sent")
    return Sent(len(wanted), stored["bytes"], len(sizes) - len(wanted))


def submit_code(transport: Transport, code: Code, request: Mapping[str, Any], local: str, tag: str) -> tuple[Sent, Any]:
    """(what was sent, the cluster's outcome): the submission asked for first; objects it lacks sent, then
    asked again with the same tag. An unchanged resubmit is one round trip and sends nothing."""
    return with_code(transport, code, request, local, lambda asked: submit_remote(transport, asked, local, tag))


def preview_code(transport: Transport, code: Code, request: Mapping[str, Any], local: str) -> tuple[Sent, Any]:
    """As `submit_code`, for a request that submits nothing (`action`: dry-run, doctor): `remote-preview`,
    no tag (asked again, it does the same again); a dropped connection is its one line."""
    cluster = transport.cluster
    words = remote_words(cluster, "remote-preview")

    def ask(asked: Mapping[str, Any]) -> Any:
        done = transport.run(words, in_workdir=True, data=json.dumps(dict(asked)).encode())
        return checked(cluster, done, local, "remote-preview")

    return with_code(transport, code, request, local, ask)


def with_code(
    transport: Transport, code: Code, request: Mapping[str, Any], local: str, ask: Callable[[Mapping[str, Any]], Any]
) -> tuple[Sent, Any]:
    cluster = transport.cluster
    files = sum(1 for i in code.resolved.items if i.kind != LINK)
    sent = Sent(0, 0, files)
    for _ in range(2):
        outcome = ask({**request, "version": local})
        if not (isinstance(outcome, dict) and "missing" in outcome):
            return sent, outcome
        there = visible(str(outcome.get("version")))
        if there != local:
            raise RemoteError(f"cluster {cluster.name!r}: ddpctl {there} there, {local} here: {install_hint(local)}")
        sent = send(transport, code, outcome["missing"], local)
    raise RemoteError(f"cluster {cluster.name!r}: still lacks code objects after they were sent")


def submit_remote(transport: Transport, request: Mapping[str, Any], local: str, tag: str) -> Any:
    """The cluster's outcome of the submission request; asked again with the same tag if the connection drops."""
    data = json.dumps(dict(request)).encode()
    words = remote_words(transport.cluster, "remote-submit", "--tag", tag)
    for attempt in range(RETRIES + 1):
        try:
            done = transport.run(words, in_workdir=True, data=data)
            break
        except RemoteError as err:
            if err.kind not in ("dropped", "timeout", "") or attempt == RETRIES:
                raise RemoteError(f"{err}; the submission's outcome is kept there: run the same command "
                                  f"again with --tag {tag} to learn it (never a second job)") from err  # fmt: skip
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
