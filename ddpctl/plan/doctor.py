"""`ddpctl doctor`: preflight checks before trusting a job to the queue.

Facts are gathered at the edge (commands through an injectable Runner, imports, the filesystem); each check is
a pure function of those facts, so the verdicts are tested with literal tables.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ddpctl import proc
from ddpctl.errors import CommandError
from ddpctl.plan import stopscan
from ddpctl.slurm import commands
from ddpctl.spec import JobSpec, time_to_seconds

OK, WARN, FAIL = "ok", "warn", "fail"
SLURM_TOOLS = ("sbatch", "srun", "squeue", "scontrol", "scancel")


@dataclass(frozen=True)
class Check:
    status: str
    name: str
    detail: str


@dataclass(frozen=True)
class Facts:
    tools: dict[str, bool]
    partition: tuple[str, int, int | None] | None = None  # (name, nodes, max time s or None = unlimited)
    torch_version: str | None = None
    submitit: bool = False
    hostname: str = ""
    host_address: str | None = None
    ifname: str | None = None
    run_dir_writable: bool = True
    script_syntax_error: str | None = None
    container: tuple[bool, str] | None = None  # (ok, detail) of ddpctl in the image; None = no probe
    stop_handling: str | None = None  # stopscan's warning about the training script, if any
    cluster: tuple[tuple[str, str, str], ...] = ()  # clusterfacts.report: (status, name, fact → consequence)
    extra: dict[str, str] = field(default_factory=dict)


def check_tools(spec: JobSpec, facts: Facts) -> Check:
    missing = [t for t in SLURM_TOOLS if not facts.tools.get(t)]
    if not missing:
        return Check(OK, "slurm tools", "sbatch, srun, squeue, scontrol, scancel on PATH")
    status = OK if spec.backend == "local" else FAIL
    return Check(status, "slurm tools", f"missing {', '.join(missing)}; without Slurm use --backend local")


def check_partition(spec: JobSpec, facts: Facts) -> Check:
    if spec.backend == "local":
        return Check(OK, "partition", "local backend: no partition needed")
    if facts.partition is None:
        return Check(FAIL, "partition", f"partition {spec.partition or '(default)'!r} not found by sinfo")
    name, nodes, max_s = facts.partition
    if spec.nodes > nodes:
        return Check(FAIL, "partition", f"{name} has {nodes} nodes, the spec asks for {spec.nodes}")
    wanted = time_to_seconds(spec.time) if spec.time else None
    if max_s is not None and wanted is not None and wanted > max_s:
        return Check(FAIL, "partition", f"time {spec.time} exceeds {name}'s limit of {max_s} s")
    return Check(OK, "partition", f"{name}: {nodes} nodes, time limit {'none' if max_s is None else f'{max_s} s'}")


def check_torch(spec: JobSpec, facts: Facts) -> Check:
    if spec.container.enabled:
        return Check(OK, "torch", "the nodes use the image's (see container)")
    if facts.torch_version is None:
        return Check(FAIL, "torch", "not importable by this Python: the launcher and workers need it")
    return Check(OK, "torch", facts.torch_version)


def check_backend(spec: JobSpec, facts: Facts) -> Check:
    if spec.backend == "submitit" and not facts.submitit:
        return Check(FAIL, "backend", "submitit is not importable: pip install submitit")
    return Check(OK, "backend", spec.backend)


def check_network(spec: JobSpec, facts: Facts) -> Check:
    if spec.backend == "local":
        return Check(OK, "network", "local backend: Gloo on loopback")
    if spec.nccl.socket_ifname:
        return Check(OK, "network", f"interface set in the spec: {spec.nccl.socket_ifname}")
    if facts.host_address and facts.host_address.startswith("127."):
        where = f"will use {facts.ifname}" if facts.ifname else "no other interface found: set nccl.socket_ifname"
        return Check(
            WARN if facts.ifname else FAIL,
            "network",
            f"{facts.hostname} resolves to loopback {facts.host_address}; {where}",
        )
    return Check(OK, "network", f"{facts.hostname} → {facts.host_address or '?'} (interface {facts.ifname or '?'})")


def check_requeue(spec: JobSpec, facts: Facts) -> Check:
    if not spec.requeue.enabled:
        return Check(WARN, "requeue", "disabled: a time limit or preemption ends the job")
    if spec.requeue.lead_s < 60:
        return Check(
            WARN,
            "requeue",
            f"lead_s={spec.requeue.lead_s}: Slurm may signal up to 30 s late; leave room for the checkpoint",
        )
    return Check(OK, "requeue", f"signal {spec.requeue.signal} {spec.requeue.lead_s} s before the limit")


def check_files(spec: JobSpec, facts: Facts) -> Check:
    if facts.script_syntax_error:
        return Check(FAIL, "batch script", facts.script_syntax_error)
    if not facts.run_dir_writable:
        return Check(FAIL, "run dir", f"{spec.run_dir} is not writable")
    return Check(OK, "files", f"batch script parses (bash -n); {spec.run_dir} writable")


def check_container(spec: JobSpec, facts: Facts) -> Check:
    if not spec.container.enabled:
        return Check(OK, "container", "none: the nodes run this host's Python")
    if facts.container is None:  # pyxis
        return Check(
            WARN,
            "container",
            f"not checked here (pyxis needs a node): run `srun -N1 "
            f"--container-image={spec.container.image} {spec.python or 'python3'} -m ddpctl --version`",
        )
    ok, detail = facts.container
    return Check(OK if ok else FAIL, "container", detail)


def check_stop_handling(spec: JobSpec, facts: Facts) -> Check:
    if facts.stop_handling:
        return Check(WARN, "stop handling", facts.stop_handling)
    if not spec.requeue.enabled:
        return Check(OK, "stop handling", "requeue disabled: stops are not asked for")
    return Check(OK, "stop handling", "the script shows a sign of handling stops")


CHECKS = (
    check_tools,
    check_partition,
    check_backend,
    check_torch,
    check_network,
    check_requeue,
    check_stop_handling,
    check_files,
    check_container,
)


def evaluate(spec: JobSpec, facts: Facts) -> list[Check]:
    return [check(spec, facts) for check in CHECKS] + [Check(*line) for line in facts.cluster]


def parse_sinfo(text: str) -> tuple[str, int, int | None] | None:
    """`sinfo -h -o %R|%D|%l` for one partition (several lines when node states differ: nodes add up)."""
    rows = [line.split("|") for line in text.strip().splitlines() if line.count("|") == 2]
    if not rows:
        return None
    nodes = sum(int(r[1]) for r in rows if r[1].isdigit())
    limit = rows[0][2].strip()
    try:
        max_s = time_to_seconds(limit)
    except ValueError:
        max_s = None
    return rows[0][0].strip().rstrip("*"), nodes, max_s


def gather(spec: JobSpec, script: str | None, runner: proc.Runner = proc.run) -> Facts:
    from ddpctl.node import netif
    from ddpctl.plan import clusterfacts

    tools = {tool: proc.available(tool) for tool in SLURM_TOOLS}
    if spec.backend == "local" or tools["scontrol"]:
        texts = clusterfacts.gather(runner) if spec.backend != "local" else clusterfacts.ClusterTexts()
    else:
        texts = clusterfacts.ClusterTexts(why_missing="scontrol is not on PATH")
    partition = None
    if tools["squeue"] and proc.available("sinfo"):
        partition = parse_sinfo(commands.sinfo_partition(spec.partition, runner))
    hostname = socket.gethostname()
    try:
        address: str | None = socket.gethostbyname(hostname)
    except OSError:
        address = None
    return Facts(
        tools=tools,
        partition=partition,
        torch_version=torch_version(),
        submitit=importlib.util.find_spec("submitit") is not None,
        hostname=hostname,
        host_address=address,
        ifname=netif.pick_ifname(hostname),
        run_dir_writable=writable(Path(spec.run_dir)),
        script_syntax_error=bash_syntax_error(script),
        stop_handling=stopscan.check_script(spec),
        container=probe_container(spec),
        cluster=tuple(clusterfacts.report(spec, texts, script)),
    )


def probe_container(spec: JobSpec) -> tuple[bool, str] | None:
    if not spec.container.enabled:
        return None
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


def torch_version() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return None
    from importlib.metadata import version

    return f"torch {version('torch')}"


def writable(path: Path) -> bool:
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    return os.access(existing, os.W_OK)


def bash_syntax_error(script: str | None) -> str | None:
    if script is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".sbatch") as handle:
        handle.write(script)
        handle.flush()
        done = proc.run(["bash", "-n", handle.name])
    return done.stderr.strip().splitlines()[-1] if done.returncode else None
