"""`ddpctl sweep SPEC --cluster NAME` (or a spec's `cluster:`): the code sent as `submit --cluster` sends it (only
what the cluster lacks), the cluster's ddpctl runs the sweep from the spec's place in the code tree with the
profile's defaults under it, and its tasks are recorded here under the cluster, so `list`, `status NAME`,
`status NAME_3`, `logs NAME_3`, `cancel NAME` and `sweep results NAME` go to that cluster. The submission is
`internal remote-submit` with the sweep's axes in its request: the same tag, so a dropped connection is asked
again and never starts a second sweep. `--dry-run` renders the points and the batch script there.

The cluster's half is ddpctl.cli.remote_sweep_there.
"""

from __future__ import annotations

import argparse
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from ddpctl.errors import ArgumentError

if TYPE_CHECKING:
    from ddpctl.remote.profiles import Cluster
    from ddpctl.spec.sweepload import Sweep

# What the cluster's `sweep` printed that names commands for there: said here with --cluster instead.
THERE_ONLY = ("status:", "cancel:")
FIELDS = ("job_id", "name", "run_dir", "backend", "sweep")  # a task's, as the cluster answers them


def axes_of(args: argparse.Namespace) -> dict[str, Any]:
    """The command line's sweep words, as the cluster's ddpctl reads them again (the file's block is in its text)."""
    return {"grid": list(args.grid), "zip": list(args.zip), "max_parallel": args.max_parallel, "name": args.name}


def run_remote(args: argparse.Namespace, loaded: Sweep) -> int:
    from ddpctl.api.remote import chosen, version
    from ddpctl.cli.remote_submit import sent_line
    from ddpctl.remote import send
    from ddpctl.remote.transport import Transport

    if args.tag is not None and not re.fullmatch(r"[0-9a-f]{32}", args.tag):
        raise ArgumentError(f"--tag {args.tag!r}: expected the 32 hex digits a dropped sweep printed")
    cluster = chosen(args.cluster, loaded.spec)
    code = send.local_code(loaded.spec)
    request = send.request_of(loaded.spec, code, cluster, args.overrides, sweep=axes_of(args))
    if args.dry_run:
        return previewed(cluster, code, {**request, "action": "sweep-dry-run"})
    tag = args.tag or uuid.uuid4().hex
    sent, outcome = send.submit_code(Transport(cluster), code, request, version(), tag)
    name, lines = recorded(cluster.name, loaded.spec.source, outcome)
    for line in lines:
        print(line)
    print(sent_line(sent, cluster.name))
    print(f"status:   ddpctl status {name}   (a task: ddpctl status {name}_0; both ask {cluster.name})")
    print(f"results:  ddpctl sweep results {name}", flush=True)
    return 0


def previewed(cluster: Cluster, code: Any, request: dict[str, Any]) -> int:
    """The points and batch script the cluster's `sweep --dry-run` printed, made visible; its exit status."""
    from ddpctl.cli.remote_submit import show_preview

    return show_preview(cluster, code, request)


def recorded(cluster: str, source: str, outcome: object) -> tuple[str, list[str]]:
    """The sweep's tasks recorded here under the cluster (all or none); (its name, the lines its `sweep` said)."""
    from ddpctl.api.remote import succeeded
    from ddpctl.remote.jobs import registry_of
    from ddpctl.remote.passthrough import for_here
    from ddpctl.sanitize import visible

    done = succeeded(cluster, outcome)
    records = task_records(done.get("tasks"), str(source), time.time())
    if not records:
        raise ArgumentError(f"cluster {cluster!r}: its sweep answered no tasks: {visible(str(done))[:80]}")
    registry_of(cluster).add_all(records)
    said = [for_here(visible(str(line)), cluster) for line in [*done.get("lines", []), *done.get("notes", [])]]
    return records[0].name, [line for line in said if not line.startswith(THERE_ONLY)]


def task_records(tasks: object, source: str, now: float) -> list[Any]:
    """JobRecords of the cluster's answer (a list of {job_id, name, run_dir, backend, sweep, point}), every text
    made visible (list and status show them); a task without an id or a sweep is left out (pure)."""
    from ddpctl.run.registry import JobRecord
    from ddpctl.sanitize import visible

    out = []
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict) or not task.get("job_id") or not task.get("sweep"):
            continue
        job_id, name, run_dir, backend, sweep = (visible(str(task.get(key) or "")) for key in FIELDS)
        point = visible(str(task["point"])) if task.get("point") is not None else None
        out.append(JobRecord(job_id, name, run_dir, backend, now, source, sweep=sweep, point=point))
    return out
