"""The local Slurm test cluster behaves like a small real cluster (tests/cluster/start.sh)."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from nodefault import restore_nodes
from slurmtools import STATE_DIR, ClusterInfo, job_info, job_output, sbatch_text, wait_for_state

pytestmark = pytest.mark.slurm

# Nodes are whole-job (select/linear) and the cluster may be shared with other test sessions, whose jobs can hold
# the nodes for a while: waits for resources are generous, they end as soon as the state is reached.
BUSY_S = 300


def _srun(*args: str) -> list[str]:
    res = subprocess.run(["srun", *args], capture_output=True, text=True, timeout=BUSY_S, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout.splitlines()


def test_cluster_has_expected_nodes_and_partitions(slurm_cluster: ClusterInfo) -> None:
    assert slurm_cluster.nodes[:2] == ("node1", "node2")
    assert set(slurm_cluster.partitions) == {"debug", "lowprio", "urgent", "debug2", "lowprio2", "urgent2", "scale"}
    assert slurm_cluster.default_partition == "debug"


def test_base_partitions_keep_two_nodes_while_scale_spans_sixteen() -> None:
    # The scale test's 16 nodes must not change where the other tests' jobs run (tests/cluster/README.md).
    res = subprocess.run(["sinfo", "-h", "-o", "%P %D"], capture_output=True, text=True, timeout=30, check=True)
    sizes: dict[str, int] = {}
    for line in res.stdout.splitlines():
        name, count = line.split()
        sizes[name.rstrip("*")] = sizes.get(name.rstrip("*"), 0) + int(count)
    assert sizes == {"debug": 2, "lowprio": 2, "urgent": 2, "debug2": 2, "lowprio2": 2, "urgent2": 2, "scale": 16}


def test_srun_runs_one_task_per_node_with_its_hostname() -> None:
    assert sorted(_srun("-N2", "hostname")) == ["node1", "node2"]


def test_each_node_has_its_own_ip_and_resolves_to_it() -> None:
    # hostname -I lists the node namespace's addresses; getent shows what MASTER_ADDR resolution would give.
    lines = _srun("-N2", "-l", "sh", "-c", 'echo "$(hostname) $(hostname -I) $(getent hosts "$(hostname)")"')
    rows = sorted(line.split(":", 1)[1].split() for line in lines)
    assert [r[0] for r in rows] == ["node1", "node2"]
    own_ips = [r[1] for r in rows]
    resolved = [r[2] for r in rows]
    assert len(set(own_ips)) == 2
    assert own_ips == resolved
    for ip in own_ips:
        addr = ipaddress.ip_address(ip)
        assert not addr.is_loopback
        assert addr in ipaddress.ip_network("10.99.0.0/24")


def test_batch_job_completes_and_runs_this_python(cleanup_jobs: Callable[[str], str]) -> None:
    job = cleanup_jobs(sbatch_text(f"hostname\n{sys.executable} -m ddpctl --help >/dev/null && echo ddpctl-ok\n"))
    assert wait_for_state(job, {"COMPLETED"}, timeout=BUSY_S) == "COMPLETED"
    info = job_info(job)
    assert info["JobState"] == "COMPLETED"
    assert info["ExitCode"] == "0:0"
    out = job_output(job)
    assert "ddpctl-ok" in out, out
    assert out.splitlines()[0] == info["BatchHost"]


def test_failing_job_is_reported_failed(cleanup_jobs: Callable[[str], str]) -> None:
    job = cleanup_jobs(sbatch_text("exit 3\n"))
    assert wait_for_state(job, {"FAILED"}, timeout=BUSY_S) == "FAILED"
    assert job_info(job)["ExitCode"] == "3:0"


VICTIM = """\
echo "start restart=${SLURM_RESTART_COUNT:-0}"
trap 'echo got-USR1' USR1
while true; do sleep 0.2; done
"""


def test_urgent_job_preempts_and_requeues_a_debug_job(
    cleanup_jobs: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    victim = cleanup_jobs(
        sbatch_text(VICTIM, "-N2", "-p", "debug", "--requeue", "--signal=B:USR1@60", "--open-mode=append")
    )
    wait_for_state(victim, {"RUNNING"}, timeout=BUSY_S)
    t_submit = time.monotonic()
    urgent = cleanup_jobs(sbatch_text("sleep 1\n", "-N2", "-p", "urgent"))
    # The victim ignores the user signal, so it is killed after GraceTime=10 s and requeued.
    wait_for_state(victim, {"PENDING", "REQUEUED", "REQUEUE_HOLD"}, timeout=60)
    t_requeued = time.monotonic()
    wait_for_state(urgent, {"RUNNING", "COMPLETING", "COMPLETED"}, timeout=30)
    # Generous: the cluster is shared, another session's job may take the nodes during the requeue hold.
    wait_for_state(victim, {"RUNNING"}, timeout=BUSY_S)
    t_running = time.monotonic()
    assert job_info(victim)["Restarts"] == "1"
    assert wait_for_state(urgent, {"COMPLETED"}, timeout=30) == "COMPLETED"
    deadline = time.monotonic() + 10
    while "restart=1" not in job_output(victim) and time.monotonic() < deadline:
        time.sleep(0.2)
    out = job_output(victim)
    assert "start restart=0" in out
    assert "got-USR1" in out  # SlurmctldParameters=preempt_send_user_signal
    assert "start restart=1" in out
    with capsys.disabled():
        print(
            f"\n[smoke] preemption: urgent submitted -> victim requeued {t_requeued - t_submit:.1f} s;"
            f" requeued -> RUNNING again {t_running - t_requeued:.1f} s"
        )


@pytest.mark.cluster_alone  # a node's slurmd is killed and started again
def test_a_restarted_slurmd_starts_without_the_job_cgroups_its_dead_one_left() -> None:
    # A job_<id> directory left by a killed slurmd failed the next job of that id on the node ("Slurmd could not
    # execve job": cpuset.cpus EBUSY under the old step directory); job ids start at 1 again with every fresh
    # controller, so it happened (tests/cluster/README.md).
    node = "node3"
    left = [
        Path(f"/sys/fs/cgroup/{c}/ddpctl-test-cluster/{node}/slurm_{node}/uid_0/job_999999/step_0")
        for c in ("cpuset", "memory", "freezer")
    ]
    for step in left:
        step.mkdir(parents=True, exist_ok=True)
    slurmd = int((STATE_DIR / "run" / f"slurmd-{node}.pid").read_text().strip())
    os.kill(slurmd, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{slurmd}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    restore_nodes()

    assert [step.parent for step in left if step.parent.exists()] == []
    assert _srun("-p", "scale", "-w", node, "hostname") == [node]
