"""OOM-kill accounting from memory cgroup files (ddpctl.node.oom): parsers on literal tables, the counter on a
cgroup tree written to disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.node.oom import OomCounter, memory_cgroup, parse_limit, parse_oom_kills

# /proc/self/cgroup of a Slurm 22.05 task under task/cgroup (cgroup v1, seen through a cgroup namespace).
V1 = """9:name=systemd:/
6:freezer:/slurm_node1/uid_0/job_1/step_0
4:memory:/slurm_node1/uid_0/job_1/step_0/task_0
3:cpuset:/slurm_node1/uid_0/job_1/step_0
0::/
"""
V2 = "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n"


@pytest.mark.parametrize(
    ("text", "counter", "v1"),
    [
        (V1, "memory/slurm_node1/uid_0/job_1/step_0/task_0/memory.oom_control", True),
        (V2, "system.slice/slurmstepd.scope/job_7/step_0/user/task_0/memory.events", False),
        ("5:cpu,memory:/a\n", "memory/a/memory.oom_control", True),
        ("", None, None),
        ("garbage\n", None, None),
    ],
)
def test_memory_cgroup_from_proc_cgroup(text: str, counter: str | None, v1: bool | None) -> None:
    found = memory_cgroup(text, Path("/cg"))
    if counter is None:
        assert found is None
    else:
        assert found is not None
        assert found.counter == Path("/cg") / counter
        assert found.v1 is v1


@pytest.mark.parametrize(
    ("text", "kills"),
    [
        ("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3),  # v1 memory.oom_control
        ("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n", 1),  # v2 memory.events
        ("oom_kill_disable 0\nunder_oom 0\n", None),  # kernels before 4.13
        ("oom_kill x\n", None),
    ],
)
def test_parse_oom_kills(text: str, kills: int | None) -> None:
    assert parse_oom_kills(text) == kills


@pytest.mark.parametrize(
    ("text", "limit"),
    [("314572800\n", 314572800), ("9223372036854771712\n", None), ("max\n", None), ("", None), (None, None)],
)
def test_parse_limit(text: str | None, limit: int | None) -> None:
    assert parse_limit(text) == limit


def write_v1_tree(root: Path, kills: int) -> Path:
    task = root / "memory" / "slurm_node1" / "uid_0" / "job_1" / "step_0" / "task_0"
    task.mkdir(parents=True)
    (task / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n")
    (task / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (task.parent / "memory.limit_in_bytes").write_text("314572800\n")  # the step's limit (ConstrainRAMSpace)
    (task.parent.parent / "memory.limit_in_bytes").write_text("419430400\n")  # the job's
    return task


def test_counter_reports_kills_since_start_and_the_smallest_limit_above(tmp_path: Path) -> None:
    task = write_v1_tree(tmp_path / "cg", kills=2)
    proc = tmp_path / "cgroup"
    proc.write_text(V1)
    counter = OomCounter(proc, tmp_path / "cg")
    counter.start()
    assert counter.since() == (0, None)  # nothing new: no limit looked up either
    (task / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert counter.since() == (1, 314572800)


def test_counter_without_a_memory_cgroup_reports_nothing(tmp_path: Path) -> None:
    counter = OomCounter(tmp_path / "missing", tmp_path)
    counter.start()
    assert counter.since() == (0, None)
