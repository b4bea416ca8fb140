"""A node of a running job dies or freezes on the real local Slurm cluster (2 nodes x 2 ranks): its slurmd and every
process of the job on it are SIGKILLed mid-training, or the job's own processes on it are SIGSTOPped (slurmd
alive). The surviving node's launcher finds it lost from its heartbeat, every surviving rank stops and the attempt
is decided within 30 s (Slurm alone waits SlurmdTimeout, 300 s, before it does anything; a frozen step held the
job until its time limit), the `node-lost` event names the node, and the run, requeued (a dead node once it is
back), ends with the uninterrupted run's final weights.

The node is brought back the way tests/cluster/start.sh starts it (start.sh restarts a dead slurmd and resumes a
node left down), frozen processes are continued, in a finally, so later tests have every node.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clitools import REPO, Cli, events, final_hash
from slurmtools import START_SCRIPT, STATE_DIR

pytestmark = pytest.mark.slurm

SPEC = REPO / "jobs" / "example.yaml"
TRAIN = ["--epochs", "2", "--steps-per-epoch", "6", "--ckpt-every", "2", "--sleep-per-step", "0.5"]
TARGET_S = 30.0  # node death -> every surviving rank stopped and the attempt decided
FAULT_AT_STEP = 5  # after the checkpoint of step 4


def submit(cli: Cli, runs: Path, *extra: str) -> tuple[str, Path]:
    return cli.submit(SPEC, "--set", f"run_dir={runs}", "--set", f"args={json.dumps(TRAIN)}", *extra)


def job_pids(node: str, job_id: str) -> list[int]:
    """Every process of the job on `node` (its step daemons included): the node's freezer cgroup of the job."""
    base = Path("/sys/fs/cgroup/freezer/ddpctl-test-cluster") / node / f"slurm_{node}"
    pids: set[int] = set()
    for job_dir in base.glob(f"uid_*/job_{job_id}"):
        for procs in job_dir.rglob("cgroup.procs"):
            pids.update(int(line) for line in procs.read_text().split())
    return sorted(pids)


def kill_node(node: str, job_id: str) -> tuple[float, list[int]]:
    """SIGKILL the node's slurmd, then every process of this job on it; the moment of the fault."""
    slurmd = int((STATE_DIR / "run" / f"slurmd-{node}.pid").read_text().strip())
    pids = job_pids(node, job_id)
    assert pids, f"no process of job {job_id} found on {node}"
    at = time.time()
    os.kill(slurmd, signal.SIGKILL)
    signal_all(pids, signal.SIGKILL)
    return at, pids


def freeze_node(node: str, job_id: str) -> tuple[float, list[int]]:
    """SIGSTOP the job's own processes on the node (launcher, torchrun, ranks; its step daemons and slurmd go on,
    so Slurm can still end them)."""
    pids = [pid for pid in job_pids(node, job_id) if not comm(pid).startswith("slurmstepd")]
    assert pids, f"no process of job {job_id} found on {node}"
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
    res = subprocess.run(["bash", str(START_SCRIPT)], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]


def first(run_dir: Path, name: str, **match: object) -> dict[str, Any] | None:
    return next((e for e in events(run_dir) if e["event"] == name and match.items() <= e.items()), None)


@pytest.fixture
def nodes_work_again() -> Iterator[None]:
    """After the test (and after its jobs are cancelled, this fixture being set up first): both nodes of the
    default partition run a step again. A restarted slurmd can refuse the next step for a few seconds ("Slurmd
    could not execve job", seen on 24.11 right after this test), which failed whichever test came next."""
    yield
    deadline = time.monotonic() + 90
    while True:
        res = subprocess.run(
            ["srun", "-N2", "-p", "debug", "-t", "1", "true"], capture_output=True, text=True, timeout=60, check=False
        )
        if res.returncode == 0:
            return
        assert time.monotonic() < deadline, f"the nodes do not run a step 90 s after the fault: {res.stderr[-500:]}"
        time.sleep(2)


@pytest.mark.parametrize("fault_kind", ["death", "freeze"])
def test_lost_node_is_found_within_30_s_and_the_run_resumes_to_the_same_weights(  # type: ignore[no-untyped-def]
    fault_kind: str, tmp_path: Path, nodes_work_again: None, cleanup_jobs
) -> None:
    cli = Cli(tmp_path / "home")
    pids: list[int] = []
    ref_id, ref_dir = submit(cli, tmp_path / "ref", "--set", "name=reference", "--backend", "local")
    job_id, run_dir = submit(cli, tmp_path / "runs")
    cleanup_jobs(job_id)
    attempt = run_dir / "attempt-0"
    try:
        cli.wait_for(
            lambda: any(
                (json.loads(p.read_text()).get("step") or 0) >= FAULT_AT_STEP for p in attempt.glob("progress-*.json")
            ),
            timeout=120,
            what=f"step {FAULT_AT_STEP}",
        )
        victim = json.loads((attempt / "node-1.json").read_text())["node"]  # not the batch host (node rank 0)
        fault, pids = (kill_node if fault_kind == "death" else freeze_node)(victim, job_id)
        cli.wait_for(lambda: first(run_dir, "decision", attempt=0) is not None, timeout=120, what="the decision")
        decided = first(run_dir, "decision", attempt=0)
        if fault_kind == "death":
            restore_nodes()  # the node comes back (a reboot): Slurm can complete the job on it and requeue it
    finally:
        signal_all(pids, signal.SIGCONT)  # a frozen process Slurm has not killed yet goes on (and is killed)
        restore_nodes()
    lost = first(run_dir, "node-lost", attempt=0)
    survivor = first(run_dir, "node-exit", attempt=0, node=json.loads((attempt / "node-0.json").read_text())["node"])
    assert lost is not None and decided is not None and survivor is not None, events(run_dir)
    print(
        f"node {fault_kind} -> node lost {lost['t'] - fault:.1f} s,"
        f" surviving ranks stopped {survivor['t'] - fault:.1f} s, decided {decided['t'] - fault:.1f} s"
    )
    assert lost["node"] == victim and lost["node_rank"] == 1, lost
    assert survivor["t"] - fault <= TARGET_S and decided["t"] - fault <= TARGET_S
    assert (decided["action"], decided["kind"]) == ("requeue", "node_failure"), decided
    status = cli.wait_terminal(job_id, timeout=300)
    # One requeue, sometimes two: a dead node's restarted slurmd may still get the old run's resent TERMINATE_JOB
    # (same job id) after the requeued run started there, which kills that run's step on it (seen once on 22.05).
    assert status["state"] == "COMPLETED" and status["restarts"] in (1, 2), events(run_dir)
    assert cli.wait_terminal(ref_id, timeout=300)["state"] == "COMPLETED"
    assert final_hash(run_dir) is not None and final_hash(run_dir) == final_hash(ref_dir)
