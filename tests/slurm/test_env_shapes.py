"""`ddpctl env` over a table of Slurm step environments: the normal shapes, and the four gaps that comparing it with
peers' derivations (Lightning, submitit, torchx) found: more than one task per node, GPUs counted per node that
differ between nodes, a ddpctl run's own nproc_per_node, and one component of a heterogeneous job.

Rows marked "22.05" are trimmed copies of what srun gave on the test cluster (Slurm 22.05.8); the others are
synthetic. Each row is one node's environment and what `ddpctl env` must answer there, or the refusal it must
print (one line, exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ddpctl.cli.env import env_listing
from ddpctl.errors import DdpctlError
from ddpctl.node.launch import prepare
from ddpctl.node.localenv import local_node_env
from ddpctl.spec import load_spec, spec_to_mapping

ROOT = Path(__file__).resolve().parents[2]


def step(nodes: int, node_id: int, **extra: str) -> dict[str, str]:
    """A well-formed step over every node of job 77, one task per node, as srun sets it."""
    hosts = f"gpu[01-{nodes:02d}]" if nodes > 1 else "gpu01"
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": hosts,
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NODEID": str(node_id),
        "SLURM_STEP_ID": "0",
        "SLURMD_NODENAME": f"gpu{node_id + 1:02d}",
        "SLURM_STEP_NUM_NODES": str(nodes),
        "SLURM_STEP_NUM_TASKS": str(nodes),
        "SLURM_NTASKS": str(nodes),
        "SLURM_STEP_TASKS_PER_NODE": f"1(x{nodes})" if nodes > 1 else "1",
        "SLURM_PROCID": str(node_id),
    }
    env.update(extra)
    return env


def without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


# (id, env, --nproc-per-node or None, expected (NODE_RANK, NNODES, NPROC_PER_NODE, WORLD_SIZE, MASTER_ADDR))
GOOD = [
    ("one node, no GPUs", step(1, 0), None, (0, 1, 1, 1, "gpu01")),
    ("two nodes, node 1", step(2, 1), None, (1, 2, 1, 2, "gpu01")),
    ("four nodes, flag", step(4, 3), 2, (3, 4, 2, 8, "gpu01")),
    ("one node, 4 GPUs on it", step(1, 0, SLURM_GPUS_ON_NODE="4"), None, (0, 1, 4, 4, "gpu01")),
    ("zero GPUs", step(2, 0, SLURM_GPUS_ON_NODE="0"), None, (0, 2, 1, 2, "gpu01")),
    ("--gpus-per-node=4", step(2, 1, SLURM_GPUS_PER_NODE="4", SLURM_GPUS_ON_NODE="4"), None, (1, 2, 4, 8, "gpu01")),
    ("--gpus-per-node=a100:2", step(2, 0, SLURM_GPUS_PER_NODE="a100:2"), None, (0, 2, 2, 4, "gpu01")),
    ("two GPU types per node", step(2, 0, SLURM_GPUS_PER_NODE="a100:2,t4:1"), None, (0, 2, 3, 6, "gpu01")),
    ("uneven GPUs, flag decides", step(2, 1, SLURM_GPUS_ON_NODE="3"), 2, (1, 2, 2, 4, "gpu01")),
    (
        "uneven GPUs, variable decides",
        step(2, 1, SLURM_GPUS_ON_NODE="3", DDPCTL_NPROC_PER_NODE="2"),
        None,
        (1, 2, 2, 4, "gpu01"),
    ),
    (
        "old spellings only",
        without(step(2, 1), "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES")
        | {"SLURM_NODELIST": "gpu[01-02]", "SLURM_NNODES": "2"},
        None,
        (1, 2, 1, 2, "gpu01"),
    ),
    (
        "no step task variables (local backend)",
        without(step(2, 1), "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS"),
        None,
        (1, 2, 1, 2, "gpu01"),
    ),
    (
        "no task counts at all",
        without(step(3, 2), "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"),
        None,
        (2, 3, 1, 3, "gpu01"),
    ),
    ("job asked 2 per node, step runs 1 per node", step(2, 0, SLURM_NTASKS_PER_NODE="2"), None, (0, 2, 1, 2, "gpu01")),
    ("requeued twice", step(2, 0, SLURM_RESTART_COUNT="2"), None, (0, 2, 1, 2, "gpu01")),
    ("array task", step(2, 1, SLURM_ARRAY_JOB_ID="70", SLURM_ARRAY_TASK_ID="7"), None, (1, 2, 1, 2, "gpu01")),
    ("irregular host names", step(3, 2, SLURM_JOB_NODELIST="a1,b[7-8]"), None, (2, 3, 1, 3, "a1")),
    ("sixteen nodes, last one", step(16, 15), None, (15, 16, 1, 16, "gpu01")),
    ("GPUs asked per node, none counted here", step(2, 0, SLURM_GPUS_PER_NODE="8"), None, (0, 2, 8, 16, "gpu01")),
    (
        "22.05: srun --het-group=0 of a 1+1 job",
        {
            "SLURMD_NODENAME": "node1",
            "SLURM_HET_SIZE": "2",
            "SLURM_JOB_ID": "2",
            "SLURM_JOB_NODELIST": "node1",
            "SLURM_JOB_NODELIST_HET_GROUP_0": "node1",
            "SLURM_JOB_NODELIST_HET_GROUP_1": "node2",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
            "SLURM_JOB_NUM_NODES_HET_GROUP_1": "1",
            "SLURM_NNODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_NODELIST": "node1",
            "SLURM_NTASKS": "1",
            "SLURM_PACK_SIZE": "2",
            "SLURM_PROCID": "0",
            "SLURM_STEP_ID": "1",
            "SLURM_STEP_NODELIST": "node1",
            "SLURM_STEP_NUM_NODES": "1",
            "SLURM_STEP_NUM_TASKS": "1",
            "SLURM_STEP_TASKS_PER_NODE": "1",
        },
        None,
        (0, 1, 1, 1, "node1"),
    ),
    (
        "22.05: srun --het-group=1 of a 1+1 job",
        {
            "SLURMD_NODENAME": "node2",
            "SLURM_HET_SIZE": "2",
            "SLURM_JOB_ID": "2",
            "SLURM_JOB_NODELIST": "node2",
            "SLURM_JOB_NODELIST_HET_GROUP_0": "node1",
            "SLURM_JOB_NODELIST_HET_GROUP_1": "node2",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
            "SLURM_JOB_NUM_NODES_HET_GROUP_1": "1",
            "SLURM_NNODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_NODELIST": "node2",
            "SLURM_NTASKS": "1",
            "SLURM_PACK_SIZE": "2",
            "SLURM_PROCID": "0",
            "SLURM_STEP_ID": "0",
            "SLURM_STEP_NODELIST": "node2",
            "SLURM_STEP_NUM_NODES": "1",
            "SLURM_STEP_NUM_TASKS": "1",
            "SLURM_STEP_TASKS_PER_NODE": "1",
        },
        None,
        (0, 1, 1, 1, "node2"),
    ),
]

HET_22_05 = {  # 22.05: `srun --het-group=1` of a job whose component 0 has 1 node and component 1 has 2
    "SLURMD_NODENAME": "node3", "SLURM_HET_SIZE": "2", "SLURM_JOB_ID": "1", "SLURM_JOB_ID_HET_GROUP_0": "1",
    "SLURM_JOB_ID_HET_GROUP_1": "2", "SLURM_JOB_NODELIST": "node[2-3]", "SLURM_JOB_NODELIST_HET_GROUP_0": "node1",
    "SLURM_JOB_NODELIST_HET_GROUP_1": "node[2-3]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
    "SLURM_JOB_NUM_NODES_HET_GROUP_1": "2", "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_NODELIST": "node[2-3]",
    "SLURM_NTASKS": "2", "SLURM_PACK_SIZE": "2", "SLURM_PROCID": "1", "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "node[2-3]", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
}  # fmt: skip
HET_BOTH_22_05 = HET_22_05 | {  # 22.05: `srun --het-group=0,1` of that job, on node2: one 3-node step
    "SLURMD_NODENAME": "node2", "SLURM_JOB_NODELIST": "node[1-3]", "SLURM_JOB_NUM_NODES": "3", "SLURM_NNODES": "3",
    "SLURM_NODEID": "1", "SLURM_NODELIST": "node[1-3]", "SLURM_NTASKS": "3", "SLURM_PROCID": "1", "SLURM_STEP_ID": "1",
    "SLURM_STEP_NODELIST": "node[1-3]", "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NUM_TASKS": "3",
    "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
}  # fmt: skip
HET_1_2 = {  # srun --het-group=1 of a job whose component 0 has 1 node and component 1 has 2
    "SLURM_JOB_ID": "90",
    "SLURM_HET_SIZE": "2",
    "SLURM_JOB_NODELIST": "n1",  # the unsuffixed job variables describe component 0
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_JOB_NODELIST_HET_GROUP_0": "n1",
    "SLURM_JOB_NUM_NODES_HET_GROUP_0": "1",
    "SLURM_JOB_NODELIST_HET_GROUP_1": "n[2-3]",
    "SLURM_JOB_NUM_NODES_HET_GROUP_1": "2",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NODELIST": "n[2-3]",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
    "SLURM_NODEID": "1",
    "SLURMD_NODENAME": "n3",
}
GOOD += [
    ("22.05: srun --het-group=1 of a 1+2 job", HET_22_05, None, (1, 2, 1, 2, "node2")),
    ("22.05: srun --het-group=0,1 of a 1+2 job", HET_BOTH_22_05, None, (1, 3, 1, 3, "node1")),
    ("het group 1 (1+2 nodes), node 1", HET_1_2, None, (1, 2, 1, 2, "n2")),
    (
        "het group 1 (1+2 nodes), node 0",
        HET_1_2 | {"SLURM_NODEID": "0", "SLURMD_NODENAME": "n2"},
        None,
        (0, 2, 1, 2, "n2"),
    ),
    ("het, old PACK spelling", without(HET_1_2, "SLURM_HET_SIZE") | {"SLURM_PACK_SIZE": "2"}, None, (1, 2, 1, 2, "n2")),
    ("het without step node list", without(HET_1_2, "SLURM_STEP_NODELIST"), None, (1, 2, 1, 2, "n2")),
    ("het component count missing", without(HET_1_2, "SLURM_JOB_NUM_NODES_HET_GROUP_1"), None, (1, 2, 1, 2, "n2")),
]

MULTI_22_05 = {  # 22.05: sbatch -N2 --ntasks-per-node=2, then `srun` (or `srun --ntasks-per-node=1`: same)
    "SLURMD_NODENAME": "node2", "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_NODELIST": "node[1-2]", "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "2", "SLURM_PROCID": "3", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node[1-2]",
    "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_TASKS_PER_NODE": "2(x2)",
}  # fmt: skip
ONE = "allowed: one task per node (srun --ntasks-per-node=1)"

# (id, env, --nproc-per-node or None, the refusal's line)
BAD = [
    (
        "22.05: 2 tasks per node",
        MULTI_22_05,
        None,
        "SLURM_STEP_TASKS_PER_NODE='2(x2)': this step runs 2 tasks on a node, and they would all get the same "
        f"NODE_RANK; {ONE}",
    ),
    (
        "22.05: srun -n3 over 2 nodes",
        MULTI_22_05 | {"SLURM_NTASKS": "3", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_TASKS_PER_NODE": "2,1"},
        None,
        f"SLURM_STEP_TASKS_PER_NODE='2,1': this step runs 2 tasks on a node, and they would all get the same NODE_RANK; {ONE}",  # noqa: E501
    ),
    (
        "22.05: srun --ntasks-per-node=1 in that job (the inherited SLURM_NTASKS=4 wins)",
        MULTI_22_05 | {"SLURM_STEP_ID": "1"},
        None,
        "SLURM_STEP_TASKS_PER_NODE='2(x2)': this step runs 2 tasks on a node",
    ),
    ("uneven tasks, last node", step(3, 0, SLURM_STEP_TASKS_PER_NODE="1(x2),4"), 1, "runs 4 tasks on a node"),
    (
        "no per-node list, more tasks than nodes",
        without(step(2, 0), "SLURM_STEP_TASKS_PER_NODE") | {"SLURM_STEP_NUM_TASKS": "8"},
        1,
        f"SLURM_STEP_NUM_TASKS=8: this step runs 8 tasks on 2 node(s), so some tasks would share a NODE_RANK; {ONE}",
    ),
    (
        "only SLURM_NTASKS",
        without(step(2, 0), "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS") | {"SLURM_NTASKS": "4"},
        1,
        "SLURM_NTASKS=4: this step runs 4 tasks on 2 node(s)",
    ),
    (
        "only SLURM_NTASKS_PER_NODE",
        without(step(2, 0), "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
        | {"SLURM_NTASKS_PER_NODE": "2"},
        1,
        f"SLURM_NTASKS_PER_NODE=2: tasks on one node would share a NODE_RANK; {ONE}",
    ),
    ("garbled per-node list", step(2, 0, SLURM_STEP_TASKS_PER_NODE="1(x"), 1, "SLURM_STEP_TASKS_PER_NODE='1(x' is not"),
    (
        "uneven GPUs, node with 2",
        step(2, 0, SLURM_GPUS_ON_NODE="2"),
        None,
        "SLURM_GPUS_ON_NODE=2 counts this node's GPUs only and the job asked for none per node (SLURM_GPUS_PER_NODE "
        "unset), so the 2 nodes may derive different WORLD_SIZEs; pass --nproc-per-node N (the same on every node), "
        "or request --gpus-per-node",
    ),
    ("uneven GPUs, node with 3", step(2, 1, SLURM_GPUS_ON_NODE="3"), None, "SLURM_GPUS_ON_NODE=3 counts this node's"),
    (
        "fewer GPUs than asked per node",
        step(2, 1, SLURM_GPUS_PER_NODE="4", SLURM_GPUS_ON_NODE="2"),
        None,
        "SLURM_GPUS_ON_NODE=2 on this node but the job asked for SLURM_GPUS_PER_NODE=4: pass --nproc-per-node N",
    ),
    (
        "garbled GPU request",
        step(2, 0, SLURM_GPUS_PER_NODE="a100:lots"),
        None,
        "SLURM_GPUS_PER_NODE='a100:lots' is not",
    ),
    (
        "het: step over part of component 1",
        HET_1_2 | {"SLURM_STEP_NODELIST": "n2", "SLURM_STEP_NUM_NODES": "1", "SLURM_NODEID": "0"},
        None,
        "this step runs on 1 of heterogeneous job component 1's 2 nodes (SLURM_STEP_NUM_NODES)",
    ),
    (
        "het: step over two components",
        HET_1_2 | {"SLURM_STEP_NODELIST": "n[1-3]", "SLURM_STEP_NUM_NODES": "3"},
        None,
        "SLURM_HET_SIZE=2: cannot tell which component of this heterogeneous job the step runs on "
        "(SLURM_STEP_NODELIST='n[1-3]'); allowed: a step over one component, e.g. srun --het-group=1 "
        "--ntasks-per-node=1",
    ),
    (
        "het: component list disagrees with its count",
        HET_1_2 | {"SLURM_JOB_NUM_NODES_HET_GROUP_1": "3"},
        None,
        "SLURM_JOB_NODELIST_HET_GROUP_1='n[2-3]' names 2 hosts but SLURM_JOB_NUM_NODES_HET_GROUP_1=3",
    ),
    ("not in a step", without(step(2, 0), "SLURM_STEP_ID"), None, "not inside a Slurm job step: run under srun"),
    (
        "step over part of the job",
        step(4, 0, SLURM_STEP_NUM_NODES="2"),
        None,
        "this step runs on 2 of the job's 4 nodes",
    ),
]


def args(nproc: int | None, run_dir: Path | None = None) -> argparse.Namespace:
    return argparse.Namespace(json=True, nproc_per_node=nproc, resolve=False, run_dir=run_dir)


@pytest.mark.parametrize(("env", "nproc", "expected"), [row[1:] for row in GOOD], ids=[row[0] for row in GOOD])
def test_good_shapes(env: dict[str, str], nproc: int | None, expected: tuple[int, int, int, int, str]) -> None:
    got = json.loads(env_listing(args(nproc), env))
    assert (got["NODE_RANK"], got["NNODES"], got["NPROC_PER_NODE"], got["WORLD_SIZE"], got["MASTER_ADDR"]) == expected


@pytest.mark.parametrize(("env", "nproc", "line"), [row[1:] for row in BAD], ids=[row[0] for row in BAD])
def test_refused_shapes(env: dict[str, str], nproc: int | None, line: str) -> None:
    with pytest.raises(DdpctlError) as info:
        env_listing(args(nproc), env)
    assert line in str(info.value)
    assert "\n" not in str(info.value)


def test_every_node_of_an_uneven_job_agrees_or_refuses() -> None:
    """Nodes holding 2 and 3 GPUs: never two different WORLD_SIZEs (the old default took each node's count)."""
    worlds = set()
    for node_id, gpus in ((0, "2"), (1, "3")):
        try:
            worlds.add(json.loads(env_listing(args(None), step(2, node_id, SLURM_GPUS_ON_NODE=gpus)))["WORLD_SIZE"])
        except DdpctlError:
            worlds.add("refused")
    assert worlds == {"refused"}


def ddpctl_env(env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_", "DDPCTL_"))}
    return subprocess.run(
        [sys.executable, "-m", "ddpctl", "env", "--json", *flags],
        env={**base, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_multi_task_step_is_one_line_exit_2() -> None:
    done = ddpctl_env(MULTI_22_05)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "ddpctl: error: SLURM_STEP_TASKS_PER_NODE='2(x2)': this step runs 2 tasks on a node, and they would all "
        f"get the same NODE_RANK; {ONE}\n"
    )


def run_dir_with(tmp_path: Path, **sets: str) -> Path:
    spec = load_spec(ROOT / "jobs" / "example.yaml", [f"{k}={v}" for k, v in sets.items()], check_paths=False)
    run_dir = tmp_path / "runs" / "77"
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))
    return run_dir


@pytest.mark.parametrize("how", ["variable", "flag"])
def test_inside_a_run_env_shows_what_launch_derives(tmp_path: Path, how: str) -> None:
    run_dir = run_dir_with(tmp_path, nodes="2", nproc_per_node="3")
    node = step(2, 1, SLURM_GPUS_PER_NODE="4", SLURM_GPUS_ON_NODE="4", DDPCTL_NPROC_PER_NODE="2")
    env = node | {"DDPCTL_RUN_DIR": str(run_dir)} if how == "variable" else node
    done = ddpctl_env(env, *(["--run-dir", str(run_dir)] if how == "flag" else []))
    assert done.returncode == 0, done.stderr
    _, dist, _, _, _ = prepare(run_dir, node)
    assert json.loads(done.stdout) == dist.as_json()
    assert (dist.nproc_per_node, dist.world_size) == (3, 6)


def test_inside_a_local_run_env_shows_loopback_like_launch(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, nodes="2", nproc_per_node="2", backend="local")
    spec = load_spec(run_dir / "job.yaml", check_paths=False)
    node = local_node_env(spec, 77, 1, 1, port=23456) | {"DDPCTL_RUN_DIR": str(run_dir)}
    done = ddpctl_env(node)
    assert done.returncode == 0, done.stderr
    _, dist, _, _, _ = prepare(run_dir, node)
    assert json.loads(done.stdout) == dist.as_json()
    assert (dist.master_addr, dist.master_port, dist.world_size) == ("127.0.0.1", 23456, 4)


def test_flag_still_overrides_inside_a_run(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, nodes="2", nproc_per_node="3")
    got = json.loads(env_listing(args(1, run_dir), step(2, 0)))
    assert (got["NPROC_PER_NODE"], got["WORLD_SIZE"]) == (1, 2)
