"""`ddpctl submit SPEC [--set ...] [--backend B] [--dry-run] [--wait]`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ddpctl.cli.common import BACKENDS, add_cluster_arg, add_spec_args

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
        "--backend", choices=BACKENDS, help="override the spec's backend (default: the spec's, else sbatch)"
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
    if args.allow_duplicate:
        return submitted(args, submit(spec, allow_duplicate=True))
    from ddpctl.run.registry import Registry

    # The duplicate check and the submission are one step per name: three simultaneous submits of one name
    # would otherwise all pass the check before any of them is recorded.
    registry = Registry.from_env()
    registry.check_writable()  # its one line, before the lock file is made beside the registry
    with registry.name_lock(spec.name):
        job = submit(spec, allow_duplicate=False)
    return submitted(args, job)


def submit(spec: JobSpec, allow_duplicate: bool) -> Submitted:
    from pathlib import Path

    from ddpctl import api
    from ddpctl.plan.preflight import check_runnable
    from ddpctl.plan.stopscan import check_script
    from ddpctl.plan.strayckpt import check_relative
    from ddpctl.proc import in_background

    # Every controller round trip starts now and runs while the plan is built: the cluster's facts (asked
    # once: the requeue mode and the partition check both read them) and the duplicate-name check. A plan
    # error is still the one reported first.
    cluster = in_background(lambda: api.cluster_facts(spec))
    duplicate = in_background(lambda: check_name(spec, allow_duplicate))
    plan = api.plan(spec, cluster=cluster)  # one plan, built once: the submission submits it
    check_runnable(spec, cluster.result())  # a partition that can never run the spec: reported before a duplicate name
    duplicate.result()
    if (warning := check_script(plan.spec)) is not None:
        print(f"ddpctl: warning: {warning}", file=sys.stderr)
    if (warning := check_relative(plan.spec, Path.cwd())) is not None:  # the scripts run where submit runs
        print(f"ddpctl: warning: {warning}", file=sys.stderr)
    return api.submit_plan(plan), plan


def submitted(args: argparse.Namespace, done: Submitted) -> int:
    job, plan = done
    print(f"submitted {job.name}: job {job.job_id} ({job.backend})")
    print(f"script:   {plan.spec.script}")  # relative paths in a spec file start at its directory: say where
    print(f"run dir:  {job.run_dir}")
    requeue = plan.spec.requeue
    print(f"requeue:  {requeue.mode} ({plan.requeue_why})" if requeue.enabled else "requeue:  disabled in the spec")
    for line in code_lines(str(job.run_dir)):
        print(line)
    print(f"logs:     ddpctl logs -f {job.job_id}")
    sys.stdout.flush()
    if args.wait:
        from ddpctl.cli.waiting import wait_for_job

        return wait_for_job(job.record)
    return 0


def check_name(spec: JobSpec, allow_duplicate: bool) -> None:
    """A live job of the same name refuses the submission (squeue: a round trip on the way to sbatch)."""
    if not allow_duplicate:
        from ddpctl.backends.names import check_duplicate
        from ddpctl.run.registry import Registry

        check_duplicate(Registry.from_env(), spec.name)


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


def code_lines(run_dir: str) -> list[str]:
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import left_out_lines, read_info, summary

    info = read_info(RunLayout(Path(run_dir)).snapshot_file)
    if info is None:
        return [summary(None)]
    return [f"{summary(info)}; runs {info.script}", *left_out_lines(info.skipped, info.left_out)]


def code_line(run_dir: str) -> str:
    """The one code line `status` shows."""
    from pathlib import Path

    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import read_info, summary

    return summary(read_info(RunLayout(Path(run_dir)).snapshot_file))
