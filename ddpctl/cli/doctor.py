"""`ddpctl doctor SPEC [--set ...]`: preflight checks for a spec on this machine/cluster."""

from __future__ import annotations

import argparse
from typing import Any

from ddpctl.cli.common import add_spec_args

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor",
        help="preflight checks: Slurm tools, partition limits, torch, network, requeue, files, cluster facts",
        description="Checks a spec against this cluster before you submit; exit status 1 if any check fails.",
    )
    add_spec_args(parser)
    parser.add_argument("--backend", choices=["sbatch", "submitit", "local"], help="override the spec's backend")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.plan.doctor import FAIL, OK, Check, evaluate, gather
    from ddpctl.plan.requeue_mode import RequeueModeError

    try:
        plan = api.plan(args.spec, backend=args.backend, overrides=args.overrides)  # what submit would submit
        mode = Check(OK, "requeue mode", f"{plan.spec.requeue.mode} ({plan.requeue_why})")
    except RequeueModeError as err:  # the rest is still worth checking, as the backend's only mode
        plan = api.plan(args.spec, backend=args.backend, overrides=[*args.overrides, "requeue.mode=requeue"])
        mode = Check(FAIL, "requeue mode", str(err))
    checks = [*evaluate(plan.spec, gather(plan.spec, plan.script)), mode]
    for check in checks:
        print(f"[{MARKS[check.status]}] {check.name}: {check.detail}")
    return 1 if any(c.status == FAIL for c in checks) else 0
