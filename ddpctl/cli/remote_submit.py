"""`ddpctl submit SPEC --cluster NAME` (or a spec's `cluster:`): the code sent (only what the cluster lacks), the
cluster's ddpctl submits, the job recorded here under its cluster (ddpctl.api.remote, ddpctl.remote.send);
`--wait` follows its state from here. `submit --dry-run` and `doctor` with a cluster: the same code sent, the
cluster's ddpctl renders or checks the spec there (its defaults, its Slurm), nothing submitted."""

from __future__ import annotations

import argparse
import re
import uuid
from typing import TYPE_CHECKING, Any

from ddpctl.errors import ArgumentError

if TYPE_CHECKING:
    from ddpctl.api.remote import RemoteJob
    from ddpctl.remote.profiles import Cluster
    from ddpctl.remote.send import Code, Sent
    from ddpctl.spec.model import JobSpec


def run_remote(args: argparse.Namespace, spec: JobSpec | None = None) -> int:
    from ddpctl import api
    from ddpctl.api.remote import chosen, shown_here, submit_on
    from ddpctl.cli.common import print_warning
    from ddpctl.sanitize import visible

    if args.dry_run:
        return run_preview(args, "dry-run", spec)
    if args.tag is not None and not re.fullmatch(r"[0-9a-f]{32}", args.tag):
        raise ArgumentError(f"--tag {args.tag!r}: expected the 32 hex digits a dropped submit printed")
    cluster = chosen(args.cluster, spec)  # --cluster's name is checked before the spec is read
    if spec is None:
        spec = api.spec_of(args.spec, backend=args.backend, overrides=args.overrides)
    extra = {"backend": args.backend, "allow_duplicate": args.allow_duplicate}
    job, sent, outcome = submit_on(cluster, spec, args.overrides, tag=args.tag or uuid.uuid4().hex, **extra)
    for warning in outcome.warnings:  # the submit policy's, given there: said here as a submit here says them
        print_warning(visible(warning))
    for line in shown_here(outcome, cluster.name):
        print(line)
    print(sent_line(sent, cluster.name))
    print(f"logs:     ddpctl logs -f --cluster {cluster.name} {job.job_id}", flush=True)
    return waited(job) if args.wait else 0


def sent_line(sent: Sent, cluster: str) -> str:
    return f"sent:     {sent.objects} objects, {sent.bytes} bytes ({sent.present} already on {cluster})"


def waited(job: RemoteJob) -> int:
    """`submit --wait --cluster`: a line per change of the job's state (asked of the cluster's ddpctl every few
    seconds over the shared connection), then the job's exit status."""
    from ddpctl.cli.jobreport import describe_state, exit_status
    from ddpctl.run.state import JobState

    label = f"job {job.job_id} ({job.name}) on {job.cluster}"
    said = [""]

    def on_state(state: JobState) -> None:
        text = describe_state(state, elapsed=False)
        if text != said[0]:
            print(f"{label}: {text}", flush=True)
            said[0] = text

    return exit_status(job.wait(poll_s=WAIT_POLL_S, on_state=on_state))


WAIT_POLL_S = 2.0  # each poll is a remote `status --json` (a round trip, and squeue there)


def run_preview(args: argparse.Namespace, action: str, spec: JobSpec | None = None) -> int:
    """`submit --dry-run` or `doctor` (action) on the cluster: what its ddpctl printed, its exit status."""
    from ddpctl import api
    from ddpctl.api.remote import chosen
    from ddpctl.remote import send

    cluster = chosen(args.cluster, spec)
    if spec is None:
        spec = api.spec_of(args.spec, backend=args.backend, overrides=args.overrides)
    code = send.local_code(spec)
    request = send.request_of(spec, code, cluster, args.overrides, backend=args.backend, action=action)
    return show_preview(cluster, code, request)


def show_preview(cluster: Cluster, code: Code, request: dict[str, Any]) -> int:
    """Send the code and have the cluster's ddpctl render or check the request there (nothing submitted): what
    it printed, made visible, then the `sent:` line; its exit status (1 where it gave none that fits)."""
    from ddpctl.api.remote import succeeded, version
    from ddpctl.remote import send
    from ddpctl.remote.passthrough import for_here
    from ddpctl.remote.transport import Transport
    from ddpctl.sanitize import visible

    sent, outcome = send.preview_code(Transport(cluster), code, request, version())
    outcome = succeeded(cluster.name, outcome)
    for line in [*outcome.get("lines", []), *outcome.get("notes", [])]:  # notes: the code store's pruning
        print(for_here(visible(str(line)), cluster.name))
    print(sent_line(sent, cluster.name))
    code_there = outcome.get("code")
    return code_there if isinstance(code_there, int) and 0 <= code_there < 126 else 1
