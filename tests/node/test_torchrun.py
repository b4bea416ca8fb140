"""The node plan (`node_plan`): each node's torchrun argv and added environment, as literal tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.node.torchrun import NodePlan, node_plan, recorder_env
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import CheckpointSettings, JobSpec, NcclSettings, RequeuePolicy

LAYOUT = RunLayout(Path("/runs/job/77"))
FR = ("TORCH_FR_BUFFER_SIZE", "2000")  # the flight recorder, bounded, for the hang watchdog's dump
A0 = "/runs/job/77/attempt-0"


def dist(node_rank: int = 1, restart: int = 0) -> DistEnv:
    return DistEnv(
        master_addr="n1",
        master_port=23456,
        node_rank=node_rank,
        nnodes=2,
        nproc_per_node=2,
        world_size=4,
        rdzv_id=f"77.{restart}",
        restart_count=restart,
        job_id="77",
        node_name=f"n{node_rank + 1}",
        hosts=("n1", "n2"),
    )


def spec(**fields: object) -> JobSpec:
    base: dict[str, object] = {
        "name": "job",
        "script": "/w/train.py",
        "args": ("--lr", "0.1"),
        "nodes": 2,
        "nproc_per_node": 2,
        "rdzv": "c10d",  # the env cases below; the `auto` default has its own cases
    }
    return JobSpec(**{**base, **fields})  # type: ignore[arg-type]


def ddpctl_env(
    node: int = 1,
    attempt: int = 0,
    ckpt: str = "/runs/job/77/checkpoints",
    keep: str = "3",
    *,
    signal: str = "USR2",
    lead: str = "120",
    script: str | None = None,
) -> list[tuple[str, str]]:
    adir = f"/runs/job/77/attempt-{attempt}"
    return [
        ("DDPCTL_RUN_DIR", "/runs/job/77"),
        ("DDPCTL_ATTEMPT", str(attempt)),
        ("DDPCTL_RESTART_COUNT", str(attempt)),
        ("DDPCTL_CKPT_DIR", ckpt),
        ("DDPCTL_CKPT_KEEP", keep),
        ("DDPCTL_STOP_FILE", f"{adir}/stop-node-{node}"),
        ("DDPCTL_STOP_SIGNAL", signal),
        *([("DDPCTL_SCRIPT_SIGNAL", script)] if script else []),
        ("DDPCTL_STOP_LEAD_S", lead),
        ("DDPCTL_NODE", f"n{node + 1}"),
        ("DDPCTL_RANK_LOG_PATTERN", f"{adir}/rank-{{rank}}.log"),
    ]


C10D = ["--rdzv-backend=c10d", "--rdzv-endpoint=n1:23456", "--rdzv-id=77.0"]
STATIC = ["--master-addr=n1", "--master-port=23456", "--node-rank=1", "--rdzv-backend=static"]
# Not this interpreter: the `-c` boot, which leaves the working directory (a clone named ddpctl/) off sys.path.
BOOT = (
    'import runpy,sys;sys.path[:1]==[""] and sys.path.pop(0);'
    'runpy.run_module(sys.argv.pop(1),run_name="__main__",alter_sys=True)'
)
PY = ["/py", "-c", BOOT]
HEAD = [*PY, "ddpctl.node.agent", "n1:23456", "--nnodes=2", "--nproc-per-node=2", "--max-restarts=0"]
# node 0 hosts the rendezvous: its agent waits for nobody ("-")
HOST_HEAD = [*HEAD[:4], "-", *HEAD[5:]]
TAIL = ["--no-python", *PY, "ddpctl.node.worker", "/w/train.py", "--lr", "0.1"]
NET_ETH0 = [
    ("NCCL_SOCKET_IFNAME", "eth0"),
    ("GLOO_SOCKET_IFNAME", "eth0"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
    ("DDPCTL_PG_TIMEOUT_S", "1800"),
]


@pytest.mark.parametrize(
    ("job", "where", "seen", "argv", "env"),
    [  # seen: ifname, local addr, inherited env
        # c10d (default), an interface and an advertised address; OMP from cpus_per_task // nproc (1 by default)
        (
            spec(),
            dist(),
            ("eth0", "10.0.0.2", {}),
            [*HEAD, *C10D, "--local-addr=10.0.0.2", *TAIL],
            [*NET_ETH0, *ddpctl_env(), ("OMP_NUM_THREADS", "1"), FR, ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120")],
        ),
        # rdzv: auto (the default) without in-job restarts: static, as fast to start as a hand-written torchrun
        (
            JobSpec(name="job", script="/w/train.py", args=("--lr", "0.1"), nodes=2, nproc_per_node=2),
            dist(),
            ("eth0", "10.0.0.2", {}),
            [*HEAD, *STATIC, *TAIL],
            [*NET_ETH0, *ddpctl_env(), ("OMP_NUM_THREADS", "1"), FR, ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120")],
        ),
        # rdzv: auto with max_restarts: c10d, whose re-rendezvous the in-job restarts need
        (
            spec(rdzv="auto", max_restarts=3),
            dist(),
            ("eth0", "10.0.0.2", {}),
            [*HEAD[:-1], "--max-restarts=3", *C10D, "--local-addr=10.0.0.2", *TAIL],
            # Each restart round's workers get a fresh store (issue 26): the shared one holds the last round's
            # addresses, and a restarted rank then fails in init with "Gloo connectFullMesh failed".
            [
                *NET_ETH0,
                *ddpctl_env(),
                ("OMP_NUM_THREADS", "1"),
                FR,
                ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120"),
                ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"),
            ],
        ),
        # static rendezvous: node rank fixed by Slurm, no endpoint, no --local-addr
        (
            spec(rdzv="static", max_restarts=2),
            dist(),
            ("eth0", "10.0.0.2", {}),
            [
                *PY,
                "ddpctl.node.agent",
                "n1:23456",
                "--nnodes=2",
                "--nproc-per-node=2",
                "--max-restarts=2",
                "--master-addr=n1",
                "--master-port=23456",
                "--node-rank=1",
                "--rdzv-backend=static",
                *TAIL,
            ],
            [*NET_ETH0, *ddpctl_env(), ("OMP_NUM_THREADS", "1"), FR, ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120")],
        ),
        # the spec's env first (it may set OMP itself), no interface known, NCCL settings, a requeued attempt
        (
            spec(
                env=(("OMP_NUM_THREADS", "4"), ("A", "x y")),
                cpus_per_task=8,
                nccl=NcclSettings(ib_disable=True, debug="WARN", async_error_handling=False, timeout_s=60),
            ),
            dist(node_rank=0, restart=2),
            (None, None, {}),
            [*HOST_HEAD, "--rdzv-backend=c10d", "--rdzv-endpoint=n1:23456", "--rdzv-id=77.2", *TAIL],
            [
                ("OMP_NUM_THREADS", "4"),
                ("A", "x y"),
                ("NCCL_IB_DISABLE", "1"),
                ("NCCL_DEBUG", "WARN"),
                ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"),
                ("DDPCTL_PG_TIMEOUT_S", "60"),
                *ddpctl_env(node=0, attempt=2),
                FR,
                ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120"),
            ],
        ),
        # OMP and the flight recorder's size inherited from the step's environment are left alone (0: off);
        # cpus split per process otherwise
        (
            spec(cpus_per_task=8),
            dist(),
            ("eth0", None, {"OMP_NUM_THREADS": "2", "TORCH_FR_BUFFER_SIZE": "0"}),
            [*HEAD, *C10D, *TAIL],
            [*NET_ETH0, *ddpctl_env(), ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120")],
        ),
        (
            spec(cpus_per_task=8),
            dist(),
            ("eth0", None, {}),
            [*HEAD, *C10D, *TAIL],
            [*NET_ETH0, *ddpctl_env(), ("OMP_NUM_THREADS", "4"), FR, ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "120")],
        ),
        # checkpoint dir/keep and the stop signal from the spec; a short lead time still gets torchrun's 30 s
        (
            spec(
                checkpoint=CheckpointSettings(dir="/ck", keep=5),
                requeue=RequeuePolicy(signal="USR1", lead_s=10, script_signal="TERM"),
            ),
            dist(),
            ("eth0", None, {}),
            [*HEAD, *C10D, *TAIL],
            [
                *NET_ETH0,
                *ddpctl_env(ckpt="/ck", keep="5", signal="USR1", lead="10", script="TERM"),
                ("OMP_NUM_THREADS", "1"),
                FR,
                ("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "30"),
            ],
        ),
    ],
)
def test_node_plan(
    job: JobSpec,
    where: DistEnv,
    seen: tuple[str | None, str | None, dict[str, str]],
    argv: list[str],
    env: list[tuple[str, str]],
) -> None:
    ifname, local_addr, inherited = seen
    plan = node_plan(job, where, LAYOUT, python="/py", ifname=ifname, local_addr=local_addr, inherited=inherited)
    assert plan == NodePlan(tuple(argv), tuple(env))


def test_the_users_flight_recorder_size_wins() -> None:
    assert recorder_env({}) == [FR]
    assert recorder_env({"TORCH_FR_BUFFER_SIZE": "50"}) == []
    assert recorder_env({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}) == []  # its name before torch 2.6
