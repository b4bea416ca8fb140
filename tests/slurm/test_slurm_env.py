"""ddpctl.slurm.env: literal environment tables -> SlurmContext / DistEnv, and every error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ddpctl.errors import SlurmEnvError
from ddpctl.slurm.env import (
    NOT_IN_JOB,
    NOT_IN_STEP,
    PORT_MAX,
    PORT_MIN,
    VARIABLES,
    DistEnv,
    SlurmContext,
    derive,
    gpus_on_node,
    master_port,
)

STEP = {
    "SLURM_JOB_ID": "1234",
    "SLURM_JOB_NODELIST": "rack[1-2]-node[01-02]",
    "SLURM_JOB_NUM_NODES": "4",
    "SLURM_NODEID": "2",
    "SLURM_STEP_ID": "0",
    "SLURMD_NODENAME": "rack2-node01",
}

CASES = [
    (
        STEP,
        4,
        DistEnv(
            master_addr="rack1-node01",
            master_port=20942,
            node_rank=2,
            nnodes=4,
            nproc_per_node=4,
            world_size=16,
            rdzv_id="1234.0",
            restart_count=0,
            job_id="1234",
            node_name="rack2-node01",
            hosts=("rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"),
        ),
    ),
    # Requeued: new restart count, new port and rendezvous id; the old spelling SLURM_NODELIST and
    # SLURM_NNODES still work; no SLURMD_NODENAME -> the node list names this node.
    (
        {
            "SLURM_JOB_ID": "1234",
            "SLURM_NODELIST": "n[09-10]",
            "SLURM_NNODES": "2",
            "SLURM_NODEID": "1",
            "SLURM_STEP_ID": "3",
            "SLURM_RESTART_COUNT": "1",
        },
        1,
        DistEnv(
            master_addr="n09",
            master_port=24338,
            node_rank=1,
            nnodes=2,
            nproc_per_node=1,
            world_size=2,
            rdzv_id="1234.1",
            restart_count=1,
            job_id="1234",
            node_name="n10",
            hosts=("n09", "n10"),
        ),
    ),
    # Array task: requeue id and rendezvous id use <array job id>_<task id>.
    (
        {
            "SLURM_JOB_ID": "1240",
            "SLURM_ARRAY_JOB_ID": "1237",
            "SLURM_ARRAY_TASK_ID": "3",
            "SLURM_JOB_NODELIST": "gpu1",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_STEP_ID": "0",
            "SLURMD_NODENAME": "gpu1",
            "SLURM_RESTART_COUNT": "",
            "SLURM_STEP_NUM_NODES": "1",
        },
        8,
        DistEnv(
            master_addr="gpu1",
            master_port=master_port("1240", "3", 0),
            node_rank=0,
            nnodes=1,
            nproc_per_node=8,
            world_size=8,
            rdzv_id="1237_3.0",
            restart_count=0,
            job_id="1240",
            node_name="gpu1",
            hosts=("gpu1",),
        ),
    ),
]


@pytest.mark.parametrize(("env", "nproc", "expected"), CASES)
def test_derive_table(env: dict[str, str], nproc: int, expected: DistEnv) -> None:
    assert derive(env, nproc) == expected


def test_job_nodelist_wins_over_nodelist() -> None:
    env = {**STEP, "SLURM_NODELIST": "other[1-4]", "SLURM_NNODES": "1"}
    assert derive(env, 1).master_addr == "rack1-node01"
    assert derive(env, 1).nnodes == 4


def test_resolve_addr_maps_master() -> None:
    dist = derive(STEP, 1, resolve_addr=lambda host: {"rack1-node01": "10.0.0.1"}[host])
    assert dist.master_addr == "10.0.0.1"
    assert dist.hosts[0] == "rack1-node01"


def test_resolve_failure_is_one_line() -> None:
    def fail(host: str) -> str:
        raise OSError(f"no address for {host}")

    with pytest.raises(SlurmEnvError, match="cannot resolve master host 'rack1-node01'"):
        derive(STEP, 1, resolve_addr=fail)


def test_context_and_requeue_id() -> None:
    ctx = SlurmContext.from_env(STEP)
    assert (ctx.job_id, ctx.node_id, ctx.num_nodes, ctx.restart_count, ctx.step_id) == ("1234", 2, 4, 0, "0")
    assert ctx.requeue_id == "1234"
    array = SlurmContext.from_env({**STEP, "SLURM_ARRAY_JOB_ID": "1200", "SLURM_ARRAY_TASK_ID": "7"})
    assert array.requeue_id == "1200_7"


def test_as_json_and_lines() -> None:
    dist = derive(STEP, 2)
    assert dist.as_json() == {
        "MASTER_ADDR": "rack1-node01",
        "MASTER_PORT": 20942,
        "NODE_RANK": 2,
        "NNODES": 4,
        "NPROC_PER_NODE": 2,
        "WORLD_SIZE": 8,
        "RESTART_COUNT": 0,
        "RDZV_ID": "1234.0",
        "JOB_ID": "1234",
        "NODE_NAME": "rack2-node01",
        "HOSTS": ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"],
    }
    assert dist.as_lines()[0] == "MASTER_ADDR=rack1-node01"
    assert dist.as_lines()[-1] == "HOSTS=rack1-node[01-02],rack2-node[01-02]"


ERRORS = [
    ({}, NOT_IN_JOB),
    ({k: v for k, v in STEP.items() if k != "SLURM_JOB_ID"}, NOT_IN_JOB),
    ({k: v for k, v in STEP.items() if k != "SLURM_NODEID"}, NOT_IN_STEP),
    ({k: v for k, v in STEP.items() if k != "SLURM_STEP_ID"}, NOT_IN_STEP),
    ({k: v for k, v in STEP.items() if k != "SLURM_JOB_NODELIST"}, "SLURM_JOB_NODELIST (or SLURM_NODELIST)"),
    ({k: v for k, v in STEP.items() if k != "SLURM_JOB_NUM_NODES"}, "SLURM_JOB_NUM_NODES (or SLURM_NNODES)"),
    (
        {**STEP, "SLURM_JOB_NUM_NODES": "3"},
        "SLURM_JOB_NODELIST='rack[1-2]-node[01-02]' names 4 hosts but SLURM_JOB_NUM_NODES=3",
    ),
    ({**STEP, "SLURM_NODEID": "4"}, "SLURM_NODEID=4 is outside 0..3"),
    ({**STEP, "SLURM_NODEID": "x"}, "SLURM_NODEID='x' is not a non-negative integer"),
    ({**STEP, "SLURM_NODEID": "-1"}, "SLURM_NODEID='-1' is not a non-negative integer"),
    ({**STEP, "SLURM_JOB_NUM_NODES": "four"}, "SLURM_JOB_NUM_NODES='four' is not a non-negative integer"),
    ({**STEP, "SLURM_RESTART_COUNT": "1.5"}, "SLURM_RESTART_COUNT='1.5' is not a non-negative integer"),
    ({**STEP, "SLURM_JOB_NODELIST": "n[3-1]"}, "SLURM_JOB_NODELIST: invalid hostlist 'n[3-1]'"),
    ({**STEP, "SLURM_STEP_NUM_NODES": "1"}, "this step runs on 1 of the job's 4 nodes"),
]


@pytest.mark.parametrize(("env", "message"), ERRORS)
def test_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(SlurmEnvError) as info:
        derive(env, 1)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_messages_are_exact() -> None:
    assert NOT_IN_JOB == "not inside a Slurm job: run under sbatch/srun (or `submit --backend local`)"
    assert NOT_IN_STEP == "not inside a Slurm job step: run under srun"


def test_nproc_must_be_positive() -> None:
    with pytest.raises(ValueError, match="nproc_per_node"):
        derive(STEP, 0)


def test_gpus_on_node() -> None:
    assert gpus_on_node({}) is None
    assert gpus_on_node({"SLURM_GPUS_ON_NODE": "4"}) == 4
    with pytest.raises(SlurmEnvError, match="SLURM_GPUS_ON_NODE"):
        gpus_on_node({"SLURM_GPUS_ON_NODE": "all"})


PORTS = [  # pinned: every node and every Python process must compute the same port
    (("1234", None, 0), 20942),
    (("1234", None, 1), 24338),
    (("1234", "3", 0), 24691),
    (("1235", None, 0), 23247),
]


@pytest.mark.parametrize(("args", "port"), PORTS)
def test_master_port_is_pinned(args: tuple[str, str | None, int], port: int) -> None:
    assert master_port(*args) == port


def test_master_port_same_in_a_fresh_interpreter() -> None:
    code = "from ddpctl.slurm.env import master_port; print(master_port('98765', '2', 3))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) == master_port("98765", "2", 3)


def test_master_port_range_and_spread() -> None:
    ports = [
        master_port(str(job), task, restart)
        for job in range(5000, 5400)
        for task in (None, "1")
        for restart in range(3)
    ]
    assert all(PORT_MIN <= p <= PORT_MAX for p in ports)
    assert not any(p in (29400, 29500, 8080) or 32768 <= p <= 60999 for p in ports)
    assert len(set(ports)) > 0.8 * len(ports)
    assert all(master_port(str(j), None, 0) != master_port(str(j), None, 1) for j in range(5000, 5400))


def test_variable_table_names_slurm_vars() -> None:
    assert all(name.startswith(("SLURM_", "SLURMD_")) for name in VARIABLES)
    assert "SLURM_RESTART_COUNT" in VARIABLES


def test_restart_never_reuses_previous_port() -> None:
    # Job 26896's digests for attempts 0 and 1 land on the same port: attempt 1 moves to the next one.
    assert master_port("26896", None, 0) == 26142
    assert master_port("26896", None, 1) == 26143


# spare_nodes: the step runs on 2 of the job's 3 nodes (here node3 and node5, node4 lost); SLURM_NODEID counts
# within the step (checked on the test cluster, tests/cluster/README.md).
SPARE_STEP = {
    "SLURM_JOB_ID": "11",
    "SLURM_JOB_NODELIST": "node[3-5]",
    "SLURM_JOB_NUM_NODES": "3",
    "SLURM_STEP_NODELIST": "node[3,5]",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_NNODES": "2",
    "SLURM_NODEID": "1",
    "SLURMD_NODENAME": "node5",
    "SLURM_STEP_ID": "1",
    "SLURM_PROCID": "1",
    "DDPCTL_SPARE_NODES": "1",
    "DDPCTL_ALLOC_RESTARTS": "1",
}


def test_with_spare_nodes_the_steps_hosts_are_the_world_and_restarts_inside_the_job_count_as_attempts() -> None:
    dist = derive(SPARE_STEP, 2)
    assert (dist.master_addr, dist.node_rank, dist.nnodes, dist.world_size, dist.hosts, dist.restart_count) == (
        "node3",
        1,
        2,
        4,
        ("node3", "node5"),
        1,
    )
    # Without the spare flag the same step is the mistake it always was: part of the job's nodes would never join.
    plain = {k: v for k, v in SPARE_STEP.items() if k != "DDPCTL_SPARE_NODES"}
    with pytest.raises(SlurmEnvError, match="this step runs on 2 of the job's 3 nodes"):
        derive(plain, 2)
    missing = {k: v for k, v in SPARE_STEP.items() if k != "SLURM_STEP_NODELIST"}
    with pytest.raises(SlurmEnvError, match="DDPCTL_SPARE_NODES is set but SLURM_STEP_NODELIST"):
        derive(missing, 2)
