"""`ddpctl doctor`: preflight checks before trusting a job to the queue.

Facts are gathered at the edge (ddpctl.cli.doctor: the cluster's facts once through ddpctl.slurm.cluster,
imports, the filesystem); each check is a pure function of those facts, so the verdicts are tested with literal
tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddpctl.plan import gpucheck
from ddpctl.plan.clusterfacts import cluster_lines
from ddpctl.plan.preflight import exceeded, limit_s
from ddpctl.plan.torchprobe import TRACKER_PACKAGES, TorchFacts
from ddpctl.slurm.cluster import ClusterFacts
from ddpctl.spec import JobSpec

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
    cluster: ClusterFacts | None = None  # None: not asked (no cluster lines); ClusterFacts(): asked, no answer
    script: str | None = None  # the batch script (None: the backend has none)
    torch: TorchFacts | None = None  # what the workers' interpreter said (ddpctl.plan.torchprobe); None: not asked
    cores: int | None = None  # the CPUs this process may run on (the local backend's nodes all run here)
    env_ifname: tuple[str, str] | None = None  # (NCCL_SOCKET_IFNAME, where it is set: the spec's env or this shell)
    backend_module: bool = False  # the Python module the backend needs (capabilities.python_module) imports
    mlflow_here: bool = True  # mlflow importable where ddpctl submits (submit creates the run); True: not needed
    hostname: str = ""
    host_address: str | None = None
    ifname: str | None = None
    run_dir_writable: bool = True
    script_syntax_error: str | None = None
    container: tuple[bool, str] | None = None  # (ok, detail) of ddpctl in the image; None = no probe
    stop_handling: str | None = None  # stopscan's warning about the training script, if any
    relative_checkpoints: str | None = None  # strayckpt's warning: checkpoints every job of the spec shares
    # The newest run of the spec's name in the registry: its job id and the nodes it excluded (ddpctl.node.exclude)
    last_run: str | None = None
    last_run_excluded: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)


def check_tools(spec: JobSpec, facts: Facts) -> Check:
    if not spec.capabilities.slurm:
        return Check(OK, "slurm tools", f"{spec.backend} backend: not needed")
    missing = [t for t in SLURM_TOOLS if not facts.tools.get(t)]
    if not missing:
        return Check(OK, "slurm tools", "sbatch, srun, squeue, scontrol, scancel on PATH")
    return Check(FAIL, "slurm tools", f"missing {', '.join(missing)}; without Slurm use --backend local")


def check_partition(spec: JobSpec, facts: Facts) -> Check:
    if not spec.capabilities.slurm:
        return Check(OK, "partition", f"{spec.backend} backend: no partition needed")
    part = facts.cluster.partition(spec.partition) if facts.cluster else None
    if part is None:
        why = f" ({facts.cluster.why_missing})" if facts.cluster and facts.cluster.why_missing else ""
        return Check(FAIL, "partition", f"partition {spec.partition or '(default)'!r} not found by scontrol{why}")
    name, nodes, max_s = part.name, part.total_nodes, limit_s(part)
    over = exceeded(spec, part)  # the rule submit refuses by (ddpctl.plan.preflight)
    if over is not None and over.what == "nodes":
        return Check(FAIL, "partition", f"{name} has {over.limit} nodes, the spec asks for {spec.alloc_nodes}")
    if over is not None:
        return Check(FAIL, "partition", f"time {spec.time} exceeds {name}'s limit of {over.limit} s")
    limit = "none" if max_s is None else f"{max_s} s"
    return Check(OK, "partition", f"{name}: {'?' if nodes is None else nodes} nodes, time limit {limit}")


def check_torch(spec: JobSpec, facts: Facts) -> Check:
    return Check(*gpucheck.torch_line(spec, facts.torch))


def check_gpus(spec: JobSpec, facts: Facts) -> Check:
    return Check(*gpucheck.gpus_line(spec, facts.torch))


def check_trackers(spec: JobSpec, facts: Facts) -> Check:
    if not facts.mlflow_here:
        return Check(
            FAIL,
            "trackers",
            f"tracking: mlflow is not installed where ddpctl submits, which creates the run: pip install "
            f"{TRACKER_PACKAGES['mlflow']} here, or drop it from tracking",
        )
    return Check(*gpucheck.trackers_line(spec, facts.torch))


def check_cores(spec: JobSpec, facts: Facts) -> Check:
    return Check(*gpucheck.cores_line(spec, facts.cores))


def check_backend(spec: JobSpec, facts: Facts) -> Check:
    needs = spec.capabilities.python_module
    if needs and not facts.backend_module:
        return Check(FAIL, "backend", f"{needs} is not importable: pip install {needs}")
    return Check(OK, "backend", spec.backend)


def check_network(spec: JobSpec, facts: Facts) -> Check:
    if line := gpucheck.network_line(spec, facts.torch, facts.env_ifname):
        return Check(*line)
    comm = "NCCL" if gpucheck.uses_nccl(spec, facts.torch) else "Gloo"
    if spec.nccl.socket_ifname:
        return Check(OK, "network", f"{comm} over {spec.nccl.socket_ifname} (nccl.socket_ifname)")
    if facts.host_address and facts.host_address.startswith("127."):
        where = f"will use {facts.ifname}" if facts.ifname else "no other interface found: set nccl.socket_ifname"
        return Check(
            WARN if facts.ifname else FAIL,
            "network",
            f"{comm}: {facts.hostname} resolves to loopback {facts.host_address}; {where}",
        )
    here = f"{facts.hostname} → {facts.host_address or '?'} (interface {facts.ifname or '?'})"
    return Check(OK, "network", f"{comm} over the interface each node's name resolves to; here {here}")


def check_requeue(spec: JobSpec, facts: Facts) -> Check:
    if not spec.requeue.enabled:
        return Check(WARN, "requeue", "disabled: a time limit or preemption ends the job")
    if spec.requeue.lead_s < 60 and spec.capabilities.slurm:
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
    if facts.script is None:
        return Check(OK, "files", f"{spec.run_dir} writable")
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


def check_checkpoint_place(spec: JobSpec, facts: Facts) -> Check:
    if facts.relative_checkpoints:
        return Check(WARN, "checkpoint place", facts.relative_checkpoints)
    return Check(OK, "checkpoint place", "no sign that the script keeps checkpoints in the working directory")


def check_excluded_nodes(spec: JobSpec, facts: Facts) -> Check:
    """The spec's own `sbatch: {exclude}` must leave the partition enough nodes (sbatch refuses the job
    otherwise), and the nodes the newest run of this name excluded are said: a new submit starts without them."""
    from ddpctl.node.exclude import given_excluded

    given = given_excluded(spec.sbatch)
    part = facts.cluster.partition(spec.partition) if facts.cluster and spec.capabilities.slurm else None
    if given and part is not None and part.total_nodes is not None:
        left = part.total_nodes - len(given)
        if left < spec.alloc_nodes:
            return Check(
                FAIL,
                "excluded nodes",
                f"sbatch.exclude leaves {part.name} {left} of its {part.total_nodes} nodes, the spec asks for "
                f"{spec.alloc_nodes}: sbatch refuses such a job",
            )
    if facts.last_run_excluded:
        new = sorted(set(facts.last_run_excluded) - given)
        if new:
            return Check(
                WARN,
                "excluded nodes",
                f"job {facts.last_run} excluded {', '.join(new)} after failures there; a new submit starts "
                f"without that: --set sbatch.exclude={','.join(sorted(given | set(new)))} keeps them out",
            )
    mine = f"sbatch.exclude: {', '.join(sorted(given))}" if given else "none"
    return Check(OK, "excluded nodes", f"{mine}; a run excludes a node that failed it (README: bad nodes)")


CHECKS = (
    check_tools,
    check_partition,
    check_backend,
    check_torch,
    check_gpus,
    check_network,
    check_trackers,
    check_cores,
    check_requeue,
    check_stop_handling,
    check_checkpoint_place,
    check_files,
    check_container,
    check_excluded_nodes,
)


def evaluate(spec: JobSpec, facts: Facts) -> list[Check]:
    """Every verdict, then the cluster's `fact → consequence` lines (pure)."""
    lines = cluster_lines(spec, facts.cluster, facts.script) if facts.cluster is not None else []
    return [check(spec, facts) for check in CHECKS] + [Check(*line) for line in lines]
