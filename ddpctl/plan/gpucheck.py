"""doctor's lines on what the workers' torch can do with the spec: GPUs, the NCCL/Gloo network, the trackers,
and ranks against cores (pure: the spec and the facts gathered at the edge in, one `Line` each out).

ddpctl.runtime opens NCCL whenever a worker sees a GPU and Gloo otherwise (ddpctl.runtime.dist.init), and local
rank r uses cuda:r. On Slurm a worker sees the GPUs its GRES gives it (gpus_per_node); the local backend's
simulated nodes are processes on this machine and see all of its GPUs, each node's rank r on the same cuda:r.

Ranks against cores: up to one rank per core is fine; more is over-subscribed (a warning: slower, and the hang
watchdog's and the collectives' timeouts come closer); more than `GROSS_RANKS_PER_CORE` per core is refused as
sure to fail (issue 45: 32 ranks on 2 cores): each rank imports torch, about 2 CPU-seconds, so start-up alone takes
minutes and the rendezvous' and collectives' timeouts come within reach before training starts.
"""

from __future__ import annotations

from ddpctl.plan.clusterfacts import FAIL, OK, WARN, Line
from ddpctl.plan.torchprobe import TRACKER_PACKAGES, TorchFacts
from ddpctl.spec import JobSpec

GROSS_RANKS_PER_CORE = 8
CPU_ONLY = "a CPU-only torch cannot use the GPUs this spec asks for"
DETECTED = "<detected>"  # what the dry run's NCCL_SOCKET_IFNAME shows for an interface picked on each node


def uses_nccl(spec: JobSpec, torch: TorchFacts | None) -> bool:
    """Whether ddpctl.runtime will open NCCL: the spec asks for GPUs, or (local backend) the workers see one."""
    if spec.gpus_per_node > 0:
        return torch is None or torch.version is None or torch.cuda is not None
    seen = torch is not None and torch.cuda is not None and torch.gpus > 0
    return spec.capabilities.loopback and seen


def torch_line(spec: JobSpec, torch: TorchFacts | None) -> Line:
    if spec.container.enabled:
        return OK, "torch", "the nodes use the image's (see container)"
    if torch is None or not torch.answered:
        why = torch.error if torch else "not probed"
        return WARN, "torch", f"not checked: {why}"
    if torch.version is None:
        return FAIL, "torch", f"not importable by {torch.python} ({torch.error}): the launcher and workers need it"
    return OK, "torch", f"{torch.summary()} in {torch.python}"


def gpus_line(spec: JobSpec, torch: TorchFacts | None) -> Line:
    want, nproc, known = spec.gpus_per_node, spec.nproc_per_node, torch is not None and torch.version is not None
    if want <= 0:
        if known and spec.capabilities.loopback and torch and torch.cuda and torch.gpus:
            return (
                WARN,
                "gpus",
                f"gpus_per_node is 0, but the workers see {torch.gpus} GPU(s) here and ddpctl.runtime opens NCCL on"
                " them; env: {CUDA_VISIBLE_DEVICES: ''} keeps the job on CPU with Gloo",
            )
        return OK, "gpus", "none asked (gpus_per_node: 0): the ranks run on CPU"
    if not known or spec.container.enabled or torch is None:
        return OK, "gpus", f"gpus_per_node {want}: not checked against a torch here"
    if torch.cuda is None:
        return FAIL, "gpus", f"{CPU_ONLY} (gpus_per_node: {want}; torch {torch.version} in {torch.python})"
    if not spec.capabilities.loopback:
        return OK, "gpus", f"gpus_per_node {want} from Slurm's GRES (see the gres line); local rank r uses cuda:r"
    return _local_gpus(spec, torch.gpus, nproc)


def _local_gpus(spec: JobSpec, shown: int, nproc: int) -> Line:
    if spec.nodes > 1:
        return (
            FAIL,
            "gpus",
            f"the local backend's {spec.nodes} simulated nodes share this machine's {shown} GPU(s): local rank r of"
            " each uses cuda:r, and NCCL refuses two ranks on one GPU (invalid usage); use nodes: 1",
        )
    if nproc > shown:
        return (
            WARN,
            "gpus",
            f"nproc_per_node {nproc} exceeds the {shown} GPU(s) this machine shows: local rank r uses cuda:r",
        )
    return OK, "gpus", f"{shown} GPU(s) visible here for nproc_per_node {nproc}: local rank r uses cuda:r"


def network_line(spec: JobSpec, torch: TorchFacts | None, env_ifname: tuple[str, str] | None) -> Line | None:
    """The local backend's line, or one about an NCCL_SOCKET_IFNAME that ddpctl replaces; None: the host's
    own (doctor's check_network)."""
    comm = "NCCL" if uses_nccl(spec, torch) else "Gloo"
    if spec.capabilities.loopback:
        return OK, "network", f"local backend: {comm} on lo (127.0.0.1)"
    if env_ifname and not spec.nccl.socket_ifname:
        value, where = env_ifname
        return (
            WARN,
            "network",
            f"NCCL_SOCKET_IFNAME={value} in {where} is replaced on each node by the interface ddpctl picks there;"
            f" nccl.socket_ifname: {value} keeps it",
        )
    return None


def trackers_line(spec: JobSpec, torch: TorchFacts | None) -> Line:
    if not spec.tracking:
        return OK, "trackers", "none (tracking:)"
    names = ", ".join(spec.tracking)
    if spec.container.enabled or torch is None or not torch.answered:
        return OK, "trackers", f"{names}: not checked here (the workers' environment was not probed)"
    if torch.missing:
        pkgs = ", ".join(TRACKER_PACKAGES[m] for m in torch.missing if m in TRACKER_PACKAGES)
        return (
            FAIL,
            "trackers",
            f"tracking: {', '.join(torch.missing)} not installed for {torch.python}: the job would fail when it"
            f" starts tracking; pip install {pkgs} there, or drop it from tracking",
        )
    return OK, "trackers", f"{names} importable by {torch.python}"


def cores_line(spec: JobSpec, cores: int | None) -> Line:
    """Ranks against the cores they share: this machine's for the local backend (every simulated node runs
    here), the node's task's cpus_per_task on Slurm (one task per node; its workers share its CPUs)."""
    if spec.capabilities.loopback:
        ranks, have, where = spec.nodes * spec.nproc_per_node, cores, "this machine (every simulated node runs here)"
    elif spec.cpus_per_task:
        ranks, have, where = spec.nproc_per_node, spec.cpus_per_task, "each node's task (cpus_per_task)"
    else:
        return OK, "cores", f"{spec.nproc_per_node} rank(s) per node share the CPUs Slurm gives the node's task"
    if have is None:
        return OK, "cores", f"{ranks} rank(s); the cores of {where} are unknown"
    said = f"{ranks} rank(s) on the {have} core(s) of {where}"
    if ranks > GROSS_RANKS_PER_CORE * have:
        limit = GROSS_RANKS_PER_CORE * have
        return FAIL, "cores", f"{said}: more than {limit} ({GROSS_RANKS_PER_CORE} per core) cannot start in time"
    if ranks > have:
        return WARN, "cores", f"{said}: over-subscribed, each rank gets {have / ranks:.2g} of a core"
    return OK, "cores", said


def plan_notes(spec: JobSpec) -> list[str]:
    """The dry run's lines on the network and, on the local backend, the GPUs (from the spec alone: the dry run
    does not probe a torch unless the spec asks for GPUs, see `dry_run_lines`)."""
    comm = "NCCL" if spec.gpus_per_node > 0 else "Gloo"
    if spec.capabilities.loopback:
        notes = [f"# network: {comm} on lo (127.0.0.1), NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME below"]
        if spec.gpus_per_node <= 0:
            notes[0] += "; NCCL instead where the workers see a GPU (ddpctl.runtime opens NCCL on one)"
        else:
            notes.append(
                f"# GPUs: local rank r (0..{spec.nproc_per_node - 1}) of each simulated node uses cuda:r of this"
                " machine, whose GPUs every simulated node shares"
            )
        return notes
    if spec.nccl.socket_ifname:
        return [f"# network: {comm} over {spec.nccl.socket_ifname} (nccl.socket_ifname)"]
    return [f"# network: {comm} over the interface each node's hostname resolves to, picked on the node ({DETECTED})"]


def dry_run_lines(spec: JobSpec, torch: TorchFacts | None) -> list[str]:
    """The dry run's torch line, and its GPU line where doctor would warn or refuse (a spec that asks for GPUs)."""
    if torch is None:
        return []
    status, _, detail = torch_line(spec, torch)
    lines = [f"torch:    {detail}" if status == OK else f"torch:    {status.upper()}: {detail}"]
    status, _, detail = gpus_line(spec, torch)
    if status != OK:
        lines.append(f"gpus:     {'refused by doctor' if status == FAIL else 'warning'}: {detail}")
    return lines
