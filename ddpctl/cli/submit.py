"""`ddpctl submit SPEC [--set ...] [--backend B] [--dry-run] [--wait]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_spec_args


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "submit", help="submit a job spec (sbatch, submitit or local backend)",
        description="Create the job's run directory, submit it and record it in the local registry. "
        "Returns at once unless --wait.",
    )
    add_spec_args(parser)
    parser.add_argument("--backend", choices=["sbatch", "submitit", "local"],
                        help="override the spec's backend (default: the spec's, else sbatch)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the batch script and each node's torchrun command and environment; submit nothing")
    parser.add_argument("--wait", action="store_true",
                        help="follow the job's state until it ends; exit with the job's exit status")
    parser.set_defaults(func=run)


def load(args: argparse.Namespace) -> Any:
    from ddpctl.spec import load_spec, resolve_paths

    overrides = list(args.overrides) + ([f"backend={args.backend}"] if args.backend else [])
    return resolve_paths(load_spec(args.spec, overrides), Path.cwd())


def run(args: argparse.Namespace) -> int:
    from ddpctl.backends import get_backend
    from ddpctl.run.registry import Registry

    spec = load(args)
    if args.dry_run:
        return dry_run(spec)
    backend = get_backend(spec.backend)
    backend.check_available()
    Registry.from_env().check_writable()
    record = backend.submit(spec, Path(args.spec).resolve())
    Registry.from_env().add(record)
    print(f"submitted {record.name}: job {record.job_id} ({record.backend})")
    print(f"run dir:  {record.run_dir}")
    print(f"logs:     ddpctl logs -f {record.job_id}")
    sys.stdout.flush()
    if args.wait:
        from ddpctl.cli.waiting import wait_for_job

        return wait_for_job(record)
    return 0


def dry_run(spec: Any) -> int:
    from ddpctl.submit.plan import plan_text

    script = None
    if spec.backend == "sbatch":
        from ddpctl.submit.render import render_for

        script = render_for(spec)
    sys.stdout.write(plan_text(spec, script))
    return 0
