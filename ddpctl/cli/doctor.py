"""`ddpctl doctor SPEC [--set ...]`: preflight checks for a spec on this machine/cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_spec_args

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor", help="preflight checks: Slurm tools, partition limits, torch, network, requeue, files",
        description="Checks a spec against this cluster before you submit; exit status 1 if any check fails.",
    )
    add_spec_args(parser)
    parser.add_argument("--backend", choices=["sbatch", "submitit", "local"], help="override the spec's backend")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl.spec import load_spec, resolve_paths
    from ddpctl.submit.doctor import FAIL, evaluate, gather

    overrides = list(args.overrides) + ([f"backend={args.backend}"] if args.backend else [])
    spec = resolve_paths(load_spec(args.spec, overrides), Path.cwd())
    script = None
    if spec.backend == "sbatch":
        from ddpctl.submit.render import render_for

        script = render_for(spec)
    checks = [*evaluate(spec, gather(spec, script)), requeue_mode_check(spec)]
    for check in checks:
        print(f"[{MARKS[check.status]}] {check.name}: {check.detail}")
    return 1 if any(c.status == FAIL for c in checks) else 0


def requeue_mode_check(spec: Any) -> Any:
    """What requeue.mode auto picks here, and why (a FAIL where the backend cannot do what the cluster needs)."""
    from ddpctl.errors import SpecError
    from ddpctl.submit.doctor import FAIL, OK, Check
    from ddpctl.submit.requeue_mode import resolve

    try:
        resolved, why = resolve(spec)
    except SpecError as err:
        return Check(FAIL, "requeue mode", str(err))
    return Check(OK, "requeue mode", f"{resolved.requeue.mode} ({why})")
