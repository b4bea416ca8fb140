"""Faults of a node of the local Slurm test cluster (tests/cluster/start.sh), and bringing it back.

Shared by tests/integration/test_node_loss_slurm.py and benchmarks/bench_node_loss.py (which puts tests/ on its
import path): a node dies (`kill_node`: its slurmd and every process of a job on it SIGKILLed) or freezes
(`freeze_node`: the job's own processes SIGSTOPped, slurmd alive) or loses its data network (`cut_data_ports`:
torch's connections dropped, Slurm's go on); `restore_nodes` brings a dead
node back the way start.sh starts it, and `wait_nodes_run_step` waits until the nodes run a step again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from slurmtools import START_SCRIPT, STATE_DIR, SlurmTestError

FREEZER = Path("/sys/fs/cgroup/freezer/ddpctl-test-cluster")


def job_pids(node: str, job_id: str) -> list[int]:
    """Every process of the job on `node` (its step daemons included): the node's freezer cgroup of the job."""
    base = FREEZER / node / f"slurm_{node}"
    pids: set[int] = set()
    for job_dir in base.glob(f"uid_*/job_{job_id}"):
        for procs in job_dir.rglob("cgroup.procs"):
            pids.update(int(line) for line in procs.read_text().split())
    return sorted(pids)


def kill_node(node: str, job_id: str) -> tuple[float, list[int]]:
    """SIGKILL the node's slurmd, then every process of this job on it; the moment of the fault."""
    slurmd = int((STATE_DIR / "run" / f"slurmd-{node}.pid").read_text().strip())
    pids = job_pids(node, job_id)
    if not pids:
        raise SlurmTestError(f"no process of job {job_id} found on {node}")
    at = time.time()
    os.kill(slurmd, signal.SIGKILL)
    signal_all(pids, signal.SIGKILL)
    return at, pids


def freeze_node(node: str, job_id: str) -> tuple[float, list[int]]:
    """SIGSTOP the job's own processes on the node (launcher, torchrun, ranks; its step daemons and slurmd go on,
    so Slurm can still end them)."""
    pids = [pid for pid in job_pids(node, job_id) if not comm(pid).startswith("slurmstepd")]
    if not pids:
        raise SlurmTestError(f"no process of job {job_id} found on {node}")
    at = time.time()
    signal_all(pids, signal.SIGSTOP)
    return at, pids


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def restore_nodes() -> None:
    """start.sh restarts a dead slurmd (its pid file names a dead process) and resumes a node left down."""
    res = subprocess.run(["bash", str(START_SCRIPT)], capture_output=True, text=True, timeout=120, check=False)
    if res.returncode != 0:
        raise SlurmTestError(f"{START_SCRIPT} exited {res.returncode}: {res.stderr[-2000:]}")


def wait_nodes_run_step(timeout: float = 90) -> None:
    """Wait until both nodes of the default partition run a step again. A restarted slurmd can refuse the next
    step for a few seconds ("Slurmd could not execve job", seen on 24.11), which failed whichever job came next."""
    deadline = time.monotonic() + timeout
    while True:
        res = subprocess.run(
            ["srun", "-N2", "-p", "debug", "-t", "1", "true"], capture_output=True, text=True, timeout=60, check=False
        )
        if res.returncode == 0:
            return
        if time.monotonic() >= deadline:
            raise SlurmTestError(f"the nodes do not run a step {timeout:.0f} s after the fault: {res.stderr[-500:]}")
        time.sleep(2)


# The cluster's bridge network, and the ports Linux gives sockets that ask for any (torch's stores and Gloo's pairs
# listen there, and every client connects from one): Slurm listens on fixed ports (6817, 6818) and srun on
# SrunPortRange (slurm.conf.in), all outside it, so a connection with an ephemeral port at both ends is the job's.
CLUSTER_NET = "10.99.0.0/24"
EPHEMERAL = "32768:60999"


@contextlib.contextmanager
def cut_data_ports(node: str) -> Iterator[None]:
    """In the node's network namespace, drop every TCP packet to or from the other nodes whose both ports are
    ephemeral (a broken data fabric: torch's connections, new and established, fail by timeout; Slurm's go on);
    undone on exit."""
    ports = ["--sport", EPHEMERAL, "--dport", EPHEMERAL, "-j", "DROP"]
    rules = [["OUTPUT", "-p", "tcp", "-d", CLUSTER_NET, *ports], ["INPUT", "-p", "tcp", "-s", CLUSTER_NET, *ports]]
    netns = ["nsenter", f"--net=/run/netns/ddpctl-{node}", "iptables"]
    for rule in rules:
        subprocess.run([*netns, "-I", *rule], check=True, capture_output=True, timeout=30)
    try:
        yield
    finally:
        for rule in rules:
            subprocess.run([*netns, "-D", *rule], check=False, capture_output=True, timeout=30)
