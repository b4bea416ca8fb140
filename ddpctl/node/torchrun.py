"""What one node runs: the torchrun argv and the environment its workers get (pure).

Built in Python, never in bash, so the same function serves `ddpctl launch` on a node and the per-node
preview of `ddpctl submit --dry-run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ddpctl import pyargv
from ddpctl.run import envvars, resumepoint, tracking
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec, resume

# torchrun SIGKILLs workers this long after forwarding SIGTERM (30 s by default); a checkpoint started on the
# warning signal must be allowed to finish, so it gets the whole lead time.
MIN_SHUTDOWN_TIMEOUT_S = 30
UNSHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"  # torch >= 2.4: one worker store per rendezvous round
# PyTorch's flight recorder: each rank keeps its last N collectives (sequence number, op, sizes, completed or
# not) in a ring buffer, which the hang watchdog has the ranks dump (ddpctl.runtime.flightrec). Gloo records
# too. Bounded: a few hundred bytes an entry; the per-step cost is in benchmarks/README.md.
FR_BUFFER = "TORCH_FR_BUFFER_SIZE"
FR_BUFFER_OLD = "TORCH_NCCL_TRACE_BUFFER_SIZE"  # its name before torch 2.6, still read by newer ones
FR_BUFFER_DEFAULT = 2000


@dataclass(frozen=True)
class NodePlan:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]  # added to the launcher's own environment

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


def rendezvous_args(spec: JobSpec, dist: DistEnv, local_addr: str | None) -> list[str]:
    endpoint = f"{dist.master_addr}:{dist.master_port}"
    if spec.rendezvous == "static":
        return [
            f"--master-addr={dist.master_addr}",
            f"--master-port={dist.master_port}",
            f"--node-rank={dist.node_rank}",
            "--rdzv-backend=static",
        ]
    args = ["--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={dist.rdzv_id}"]
    if local_addr:
        # The address this agent advertises; without it torchrun uses the FQDN, which on many clusters
        # resolves to 127.0.1.1 and breaks the other nodes' connections.
        args.append(f"--local-addr={local_addr}")
    return args


def awaited_endpoint(dist: DistEnv) -> str:
    """What this node's agent waits for before torchrun connects (ddpctl.node.agent): the rendezvous host's
    store on every other node, nothing (``-``) on the host itself."""
    if dist.node_rank == 0 or dist.nnodes == 1:
        return "-"
    return f"{dist.master_addr}:{dist.master_port}"


def standin_argv(spec: JobSpec, dist: DistEnv, python: str) -> list[str]:
    """Test/benchmark-only (envvars.STANDIN): the torch-free stand-in plays this node's ranks."""
    return [
        *pyargv.python_module(python, "ddpctl.node.standin"),
        f"--nnodes={dist.nnodes}",
        f"--nproc-per-node={dist.nproc_per_node}",
        f"--node-rank={dist.node_rank}",
        *spec.args,
    ]


def torchrun_argv(
    spec: JobSpec, dist: DistEnv, python: str, local_addr: str | None = None, args: tuple[str, ...] | None = None
) -> list[str]:
    """`args`: the script's arguments as this attempt gives them (`script_args`); None: the spec's as written."""
    if args is not None:
        spec = replace(spec, args=args)
    if dict(spec.env).get(envvars.STANDIN) == "1":
        return standin_argv(spec, dist, python)
    return [
        *pyargv.python_module(
            python, "ddpctl.node.agent"
        ),  # torchrun, after waiting for the rendezvous host where that saves time
        awaited_endpoint(dist),
        f"--nnodes={dist.nnodes}",
        f"--nproc-per-node={dist.nproc_per_node}",
        f"--max-restarts={spec.max_restarts}",
        *rendezvous_args(spec, dist, local_addr),
        # ddpctl.node.worker redirects each rank's output to its stable rank-<N>.log and watches for the stop flag.
        "--no-python",
        *pyargv.python_module(python, "ddpctl.node.worker"),
        spec.script,
        *spec.args,
    ]


def network_env(spec: JobSpec, ifname: str | None) -> list[tuple[str, str]]:
    nccl = spec.nccl
    env: list[tuple[str, str]] = []
    if ifname:
        env += [("NCCL_SOCKET_IFNAME", ifname), ("GLOO_SOCKET_IFNAME", ifname)]
    if nccl.ib_disable:
        env.append(("NCCL_IB_DISABLE", "1"))
    if nccl.debug:
        env.append(("NCCL_DEBUG", nccl.debug))
    flag = "1" if nccl.async_error_handling else "0"
    env += [("TORCH_NCCL_ASYNC_ERROR_HANDLING", flag), (envvars.PG_TIMEOUT_S, str(nccl.timeout_s))]
    return env


def ddpctl_env(spec: JobSpec, dist: DistEnv, layout: RunLayout) -> list[tuple[str, str]]:
    attempt = dist.restart_count
    script_signal = [(envvars.SCRIPT_SIGNAL, spec.requeue.script_signal)] if spec.requeue.script_signal else []
    return [
        (envvars.RUN_DIR, str(layout.root)),
        (envvars.ATTEMPT, str(attempt)),
        (envvars.RESTART_COUNT, str(attempt)),
        (envvars.CKPT_DIR, str(layout.checkpoints(spec.checkpoint.dir))),
        (envvars.CKPT_KEEP, str(spec.checkpoint.keep)),
        (envvars.STOP_FILE, str(layout.stop_file(attempt, dist.node_rank))),
        (envvars.STOP_SIGNAL, spec.requeue.signal),
        *script_signal,
        (envvars.STOP_LEAD_S, str(spec.requeue.lead_s)),
        (envvars.NODE_NAME, dist.node_name),
        (envvars.RANK_LOG, layout.rank_log_pattern(attempt)),
    ]


def script_args(spec: JobSpec, env: Mapping[str, str], resume_from: str | None) -> tuple[str, ...]:
    """The script's arguments on this attempt: `$VAR`s expanded from the job's environment (the spec check
    refused any other name) and, when a complete checkpoint exists (`resume_from`), the resume arguments."""
    args = [resume.expand_env(arg, env) for arg in spec.args]
    rule = resumepoint.rule_of(spec)
    if resume_from is not None and rule is not None:
        ckpt_dir = env.get(envvars.CKPT_DIR, "")
        extra = resume.resume_args(rule.args, resume_from, ckpt_dir)
        args += [resume.expand_env(arg, env) for arg in extra]
    return tuple(args)


def recorder_env(given: Mapping[str, str]) -> list[tuple[str, str]]:
    """The flight recorder on with a bounded buffer, unless the user set its size (0 turns it off)."""
    return [] if FR_BUFFER in given or FR_BUFFER_OLD in given else [(FR_BUFFER, str(FR_BUFFER_DEFAULT))]


def omp_threads(spec: JobSpec) -> int:
    return max(1, (spec.cpus_per_task or 1) // spec.nproc_per_node)


def node_plan(
    spec: JobSpec,
    dist: DistEnv,
    layout: RunLayout,
    *,
    python: str,
    ifname: str | None,
    local_addr: str | None = None,
    inherited: dict[str, str] | None = None,
    trackers: Mapping[str, Any] | None = None,
    resume_from: str | None = None,
) -> NodePlan:
    """`trackers`: the run's tracking.json (ddpctl.run.tracking), whose identities every attempt's ranks get;
    `resume_from`: the newest complete checkpoint of a script that keeps its own (spec `resume:`)."""
    env = [*spec.env, *network_env(spec, ifname), *ddpctl_env(spec, dist, layout)]
    env += tracking.rank_env(trackers or {}, layout, {**(inherited or {}), **dict(spec.env)})
    if "OMP_NUM_THREADS" not in (inherited or {}) and "OMP_NUM_THREADS" not in dict(spec.env):
        env.append(("OMP_NUM_THREADS", str(omp_threads(spec))))
    env += recorder_env({**(inherited or {}), **dict(spec.env)})
    shutdown = max(MIN_SHUTDOWN_TIMEOUT_S, spec.requeue.lead_s)
    env.append(("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(shutdown)))
    if spec.max_restarts > 0 and spec.rendezvous == "c10d":
        # torchrun's restarts: c10d rendezvous otherwise hands every round's workers the store of its first round,
        # and init_process_group(env://) adds no prefix per round there, so a restarted rank reads the previous
        # round's Gloo/NCCL addresses and fails in init ("Gloo connectFullMesh failed ... Connection refused").
        # Unshared, rank 0 of each round's workers serves a fresh store on a port of its own.
        env.append((UNSHARED_STORE, "1"))
    args = script_args(spec, {**(inherited or {}), **dict(env)}, resume_from)
    return NodePlan(tuple(torchrun_argv(spec, dist, python, local_addr, args)), tuple(env))
