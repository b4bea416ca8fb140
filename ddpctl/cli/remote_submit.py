"""`ddpctl submit SPEC --cluster NAME`: the code sent (only what the cluster lacks), the cluster's ddpctl
submits, the job recorded here under its cluster (ddpctl.remote.send has the steps)."""

from __future__ import annotations

import argparse
import os
import re
import time
import uuid
from typing import TYPE_CHECKING

from ddpctl.errors import ArgumentError, RemoteError, SpecError

if TYPE_CHECKING:
    from ddpctl.remote.profiles import Cluster
    from ddpctl.remote.send import Sent
    from ddpctl.spec.model import JobSpec


def run_remote(args: argparse.Namespace, spec: JobSpec | None = None) -> int:
    from ddpctl import __version__, api
    from ddpctl.remote import send
    from ddpctl.remote.transport import Transport

    if args.dry_run or args.wait:
        raise ArgumentError(f"submit --cluster: {'--dry-run' if args.dry_run else '--wait'} is not supported yet")
    if args.tag is not None and not re.fullmatch(r"[0-9a-f]{32}", args.tag):
        raise ArgumentError(f"--tag {args.tag!r}: expected the 32 hex digits a dropped submit printed")
    cluster = chosen(args.cluster, spec)
    if spec is None:
        spec = api.spec_of(args.spec, backend=args.backend, overrides=args.overrides)
    code = send.local_code(spec)
    transport = Transport(cluster)
    extra = {"backend": args.backend, "allow_duplicate": args.allow_duplicate}
    request = send.request_of(spec, code, cluster, args.overrides, **extra)
    sent, outcome = send.submit_code(transport, code, request, __version__, args.tag or uuid.uuid4().hex)
    return shown(cluster.name, spec.source, sent, outcome)


def chosen(name: str | None, spec: JobSpec | None) -> Cluster:
    """The cluster `--cluster` names, else the spec's `cluster:`: an unknown name is one line (did you mean),
    naming the spec file when the spec chose it."""
    from ddpctl.remote.profiles import clusters_path, find, read_clusters

    path = clusters_path()
    if name:
        return find(read_clusters(path), name, path)
    assert spec is not None and spec.cluster is not None  # submit chose the remote path for it
    try:
        return find(read_clusters(path), spec.cluster, path)
    except SpecError as err:
        raise SpecError(f"{spec.source}: cluster: {err}") from None


def shown(cluster: str, source: str, sent: Sent, outcome: object) -> int:
    from ddpctl.run.registry import JobRecord, Registry, registry_home
    from ddpctl.sanitize import visible

    if not isinstance(outcome, dict):
        raise RemoteError(f"cluster {cluster!r}: remote-submit answered no outcome: {visible(str(outcome))[:80]}")
    if not outcome.get("ok"):
        err = SpecError(f"cluster {cluster!r}: {visible(str(outcome.get('error')))}")
        code = outcome.get("code")
        err.exit_code = code if isinstance(code, int) and 0 < code < 126 else 1
        raise err
    job_id, name = visible(str(outcome["job_id"])), visible(str(outcome["name"]))
    record = JobRecord(job_id, name, str(outcome["run_dir"]), str(outcome["backend"]), time.time(), str(source))
    Registry(registry_home(os.environ) / "clusters" / cluster).add(record)
    for line in outcome.get("lines", []):
        print(visible(str(line)))
    print(f"sent:     {sent.objects} objects, {sent.bytes} bytes ({sent.present} already on {cluster})")
    print(f"logs:     ddpctl logs -f --cluster {cluster} {job_id}")
    return 0
