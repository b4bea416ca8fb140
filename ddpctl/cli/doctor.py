"""`ddpctl doctor SPEC [--set ...]`: preflight checks for a spec on this machine/cluster.

The edge of ddpctl.plan.doctor: the facts are gathered here (the cluster's once, through ddpctl.slurm.cluster;
this host's imports, name and files), the verdicts are pure functions of them there.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ddpctl.cli.common import add_cluster_arg, add_spec_args, backend_choices

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from ddpctl.plan.doctor import Facts
    from ddpctl.plan.torchprobe import TorchFacts
    from ddpctl.slurm.cluster import ClusterFacts
    from ddpctl.spec import JobSpec

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor",
        help="preflight checks: Slurm tools, partition limits, torch and GPUs, network, trackers, cores, requeue,"
        " files, cluster facts",
        description="Checks a spec against this cluster before you submit; exit status 1 if any check fails. "
        "With --cluster (or the spec's cluster:), the remote cluster's ddpctl checks it there.",
    )
    add_spec_args(parser)
    parser.add_argument("--backend", choices=backend_choices(), help="override the spec's backend")
    add_cluster_arg(
        parser,
        "check on this remote cluster (clusters.yaml) over SSH, by its ddpctl, with the spec's code sent "
        "as submit --cluster sends it (wins over the spec's cluster:)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api

    if args.cluster:  # wins over the spec's `cluster:`; an unknown name is said before the spec is read
        from ddpctl.cli.remote_submit import run_preview

        return run_preview(args, "doctor")
    spec = api.spec_of(args.spec, backend=args.backend, overrides=args.overrides)
    if spec.cluster:
        from ddpctl.cli.remote_submit import run_preview

        return run_preview(args, "doctor", spec)
    return diagnose(spec)


def diagnose(spec: JobSpec) -> int:
    """Every check of the spec here, one line each; 1 if any failed."""
    from dataclasses import replace

    from ddpctl import api, proc
    from ddpctl.plan.doctor import FAIL, OK, Check, evaluate
    from ddpctl.plan.requeue_mode import RequeueModeError

    torch = proc.in_background(lambda: probe_torch(spec))  # seconds for a CUDA torch: beside the rest
    # Asked once: the plan's requeue mode and every cluster check read the same facts.
    cluster = api.cluster_facts(spec, with_nodes=True)
    try:
        plan = api.plan(spec, cluster=cluster)  # what submit would submit
        mode = Check(OK, "requeue mode", f"{plan.spec.requeue.mode} ({plan.requeue_why})")
    except RequeueModeError as err:  # the rest is still worth checking, as the backend's only mode
        plan = api.plan(spec, overrides=["requeue.mode=requeue"], cluster=cluster)
        mode = Check(FAIL, "requeue mode", str(err))
    facts = replace(gather_host_facts(plan.spec, plan.script, cluster), torch=torch.result())
    checks = [*evaluate(plan.spec, facts), mode]
    for check in checks:
        print(f"[{MARKS[check.status]}] {check.name}: {check.detail}")
    return 1 if any(c.status == FAIL for c in checks) else 0


def gather_host_facts(spec: JobSpec, script: str | None, cluster: ClusterFacts) -> Facts:
    import os
    import socket
    from pathlib import Path

    from ddpctl import proc
    from ddpctl.node import netif
    from ddpctl.plan import stopscan, strayckpt
    from ddpctl.plan.doctor import SLURM_TOOLS, Facts

    hostname = socket.gethostname()
    try:
        address: str | None = socket.gethostbyname(hostname)
    except OSError:
        address = None
    return Facts(
        tools={tool: proc.available(tool) for tool in SLURM_TOOLS},
        cluster=cluster,
        script=script,
        cores=len(os.sched_getaffinity(0)),
        env_ifname=env_ifname(spec, os.environ),
        backend_module=importable(spec.capabilities.python_module),
        mlflow_here="mlflow" not in spec.tracking or importable("mlflow"),
        hostname=hostname,
        host_address=address,
        ifname=netif.pick_ifname(hostname),
        run_dir_writable=writable(Path(spec.run_dir)),
        script_syntax_error=bash_syntax_error(script),
        stop_handling=stopscan.check_script(spec),
        relative_checkpoints=strayckpt.check_relative(spec, Path.cwd()),
        container=probe_container(spec),
        **last_run_excluded(spec.name),
    )


def last_run_excluded(name: str) -> dict[str, Any]:
    """The newest registry job of this name and the nodes its run excluded (Facts.last_run*); none: {}."""
    from pathlib import Path

    from ddpctl.run import history
    from ddpctl.run.layout import RunLayout
    from ddpctl.run.registry import Registry
    from ddpctl.sanitize import visible

    try:
        named = [r for r in Registry.from_env().records() if r.name == name]
    except OSError:
        return {}
    if not named:
        return {}
    excluded = history.load(RunLayout(Path(named[-1].run_dir)).events).excluded_nodes()
    return {"last_run": named[-1].job_id, "last_run_excluded": tuple(visible(n) for n in sorted(excluded))}


def importable(module: str | None) -> bool:
    import importlib.util

    return module is None or importlib.util.find_spec(module) is not None


def probe_container(spec: JobSpec) -> tuple[bool, str] | None:
    if not spec.container.enabled:
        return None
    import os

    from ddpctl import proc
    from ddpctl.errors import CommandError
    from ddpctl.plan.container import PROBE_TIMEOUT_S, probe_argv, probe_verdict

    argv = probe_argv(spec)
    if argv is None:
        return None
    if not proc.available(argv[0]):
        return probe_verdict(spec, None, "")
    env = {**os.environ, "USER": os.environ.get("USER") or str(os.getuid())}  # ch-run needs $USER
    try:
        done = proc.run(argv, timeout=PROBE_TIMEOUT_S, env=env)
    except CommandError as err:
        return False, str(err)
    return probe_verdict(spec, done.returncode, done.stdout + "\n" + done.stderr if done.returncode else done.stdout)


def probe_torch(spec: JobSpec) -> TorchFacts | None:
    """What the workers' interpreter (the spec's `python`, else this one) says of its torch and the trackers,
    in the job's environment (this one plus the spec's env:); None with a container (the image's is used)."""
    if spec.container.enabled:
        return None
    import os
    import sys

    from ddpctl import proc
    from ddpctl.errors import CommandError, CommandTimeout
    from ddpctl.plan import torchprobe

    python = spec.python or sys.executable
    try:
        done = proc.run(
            torchprobe.probe_argv(python, spec.tracking),
            timeout=torchprobe.PROBE_TIMEOUT_S,
            env={**os.environ, **dict(spec.env)},
        )
    except CommandTimeout as err:  # slow is not broken: said, not refused
        return torchprobe.unanswered(python, str(err))
    except CommandError as err:  # no such interpreter: the job cannot start either
        return torchprobe.TorchFacts(python, error=str(err))
    return torchprobe.parse(python, done.returncode, done.stdout, done.stderr)


def env_ifname(spec: JobSpec, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """NCCL_SOCKET_IFNAME as the spec's env: or the submitting shell sets it (the job inherits the latter)."""
    if value := dict(spec.env).get("NCCL_SOCKET_IFNAME"):
        return value, "the spec's env"
    if value := environ.get("NCCL_SOCKET_IFNAME"):
        return value, "this shell's environment"
    return None


def writable(path: Path) -> bool:
    import os
    from pathlib import Path

    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    return os.access(existing, os.W_OK)


def bash_syntax_error(script: str | None) -> str | None:
    if script is None:
        return None
    import tempfile

    from ddpctl import proc

    with tempfile.NamedTemporaryFile("w", suffix=".sbatch") as handle:
        handle.write(script)
        handle.flush()
        done = proc.run(["bash", "-n", handle.name])
    return done.stderr.strip().splitlines()[-1] if done.returncode else None
