"""`ddpctl submit SPEC [--set ...] [--backend B] [--dry-run] [--wait]`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ddpctl.cli.common import add_cluster_arg, add_spec_args, backend_choices, print_warning

if TYPE_CHECKING:
    from ddpctl.api import Job
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.plan.torchprobe import TorchFacts
    from ddpctl.proc import Pending
    from ddpctl.spec import JobSpec

    Submitted = tuple[Job, SubmissionPlan]


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "submit",
        help="submit a job spec (sbatch, submitit or local backend)",
        description="Create the job's run directory, submit it and record it in the local registry. "
        "Returns at once unless --wait.",
    )
    add_spec_args(parser)
    parser.add_argument(
        "--backend", choices=backend_choices(), help="override the spec's backend (default: the spec's, else sbatch)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the batch script and each node's torchrun command and environment; submit nothing (with a "
        "cluster: rendered there by its ddpctl)",
    )
    parser.add_argument(
        "--allow-duplicate",
        action="store_true",
        help="submit even if a job of the same name is still queued or running",
    )
    parser.add_argument(
        "--wait", action="store_true", help="follow the job's state until it ends; exit with the job's exit status"
    )
    add_cluster_arg(
        parser,
        "submit on this remote cluster (clusters.yaml) over SSH: the code snapshot is sent, only what it "
        "lacks (wins over the spec's cluster:); with --wait its state is followed from here",
    )
    parser.add_argument("--tag", help=argparse.SUPPRESS)  # --cluster: learn a dropped submission's outcome
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.cli.remote_submit import run_remote

    if args.cluster:  # wins over the spec's `cluster:`; an unknown name is said before the spec is read
        return run_remote(args)
    spec = api.spec_of(args.spec, backend=args.backend, overrides=args.overrides)
    if spec.cluster:
        return run_remote(args, spec)
    if args.dry_run:
        return dry_run(spec)
    return submitted(args, submit(spec, allow_duplicate=args.allow_duplicate))


def submit(spec: JobSpec, allow_duplicate: bool) -> Submitted:
    """The API's submission with its policy (ddpctl.api.submit_checked); its warning printed as a line."""
    from ddpctl import api

    return api.submit_checked(spec, allow_duplicate=allow_duplicate, warn=print_warning)


def submitted(args: argparse.Namespace, done: Submitted) -> int:
    from ddpctl.api.outcome import outcome_of

    job, plan = done
    for line in outcome_of(job, plan).lines():  # its warnings were printed as the policy gave them
        print(line)
    print(f"logs:     ddpctl logs -f {job.job_id}")
    sys.stdout.flush()
    if args.wait:
        from ddpctl.cli.waiting import wait_for_job

        return wait_for_job(job.record)
    return 0


def dry_run(spec: JobSpec) -> int:
    """The plan as it would be submitted, with the script each attempt runs: the one in the run's copy of the
    code. The snapshot's checks run (limits, names, links); nothing is copied."""
    import dataclasses

    from ddpctl import api
    from ddpctl.plan.submission import PLACEHOLDER_JOB_ID
    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import check, left_out_lines

    torch = gpu_probe(spec)  # beside the snapshot's check
    preview = check(spec)
    if preview is None:
        sys.stdout.write(api.plan(spec).text())
        print("code:     not snapshotted (snapshot: off): each attempt runs the script as it is then")
        return print_torch(spec, torch)
    code = RunLayout(spec.run_base.resolve() / PLACEHOLDER_JOB_ID).code_dir
    pinned = str(code / preview.script_rel)
    sys.stdout.write(api.plan(dataclasses.replace(spec, script=pinned)).text())
    m = preview.manifest
    print(f"code:     {preview.mode} snapshot of {m.root}: {len(m.entries)} files, {m.total / 2**20:.1f} MB "
          f"(checked, not copied); each attempt runs {pinned}")  # fmt: skip
    for line in left_out_lines(m.skipped, m.left_out):
        print(line)
    return print_torch(spec, torch)


def gpu_probe(spec: JobSpec) -> Pending[TorchFacts | None] | None:
    """A spec that asks for GPUs: the workers' torch asked, in the background, what it can do with them."""
    if spec.gpus_per_node <= 0 or spec.container.enabled:
        return None
    from ddpctl import proc
    from ddpctl.cli.doctor import probe_torch

    return proc.in_background(lambda: probe_torch(spec))


def print_torch(spec: JobSpec, torch: Pending[TorchFacts | None] | None) -> int:
    """The dry run's torch line and, where doctor would refuse or warn, its GPU line (exit status 0: a dry run)."""
    from ddpctl.plan.gpucheck import dry_run_lines

    for line in dry_run_lines(spec, torch.result() if torch else None):
        print(line)
    return 0


def code_line(run_dir: str) -> str:
    """The one code line `status` shows."""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import read_info, summary

    return summary(read_info(RunLayout(Path(run_dir)).snapshot_file))
