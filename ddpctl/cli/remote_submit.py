"""`ddpctl submit SPEC --cluster NAME` (or a spec's `cluster:`): the code sent (only what the cluster lacks), the
cluster's ddpctl submits, the job recorded here under its cluster (ddpctl.api.remote, ddpctl.remote.send)."""

from __future__ import annotations

import argparse
import re
import uuid
from typing import TYPE_CHECKING

from ddpctl.errors import ArgumentError

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec


def run_remote(args: argparse.Namespace, spec: JobSpec | None = None) -> int:
    from ddpctl import api
    from ddpctl.api.remote import chosen, submit_on

    if args.dry_run or args.wait:
        raise ArgumentError(f"submit --cluster: {'--dry-run' if args.dry_run else '--wait'} is not supported yet")
    if args.tag is not None and not re.fullmatch(r"[0-9a-f]{32}", args.tag):
        raise ArgumentError(f"--tag {args.tag!r}: expected the 32 hex digits a dropped submit printed")
    cluster = chosen(args.cluster, spec)  # --cluster's name is checked before the spec is read
    if spec is None:
        spec = api.spec_of(args.spec, backend=args.backend, overrides=args.overrides)
    extra = {"backend": args.backend, "allow_duplicate": args.allow_duplicate}
    job, sent, lines = submit_on(cluster, spec, args.overrides, tag=args.tag or uuid.uuid4().hex, **extra)
    for line in lines:
        print(line)
    print(f"sent:     {sent.objects} objects, {sent.bytes} bytes ({sent.present} already on {cluster.name})")
    print(f"logs:     ddpctl logs -f --cluster {cluster.name} {job.job_id}")
    return 0
