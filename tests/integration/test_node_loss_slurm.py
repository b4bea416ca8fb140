"""A node of a running job dies or freezes on the real local Slurm cluster (2 nodes x 2 ranks): its slurmd and every
process of the job on it are SIGKILLed mid-training, or the job's own processes on it are SIGSTOPped (slurmd
alive). The surviving node's launcher finds it lost from its heartbeat, every surviving rank stops and the attempt
is decided within 30 s (Slurm alone waits SlurmdTimeout, 300 s, before it does anything; a frozen step held the
job until its time limit), the `node-lost` event names the node, and the run ends with the uninterrupted run's
final weights.

A dead node stays dead for the whole test, as real dead nodes do, in partition `scale` (free nodes beside the
job's two): Slurm keeps the job COMPLETING until SlurmdTimeout (300 s, Slurm's default here) and would start its
requeue only then; the run goes on in a successor job that excludes the dead node and trains again long before
that (benchmarks/bench_node_loss.py measures how soon). A frozen node (slurmd alive) stays in `debug`'s two
nodes: no room to exclude it, its next attempt waits for Slurm to end the frozen processes, which it does at once.

The node is brought back the way tests/cluster/start.sh starts it (start.sh restarts a dead slurmd and resumes a
node left down), frozen processes are continued, in a finally, so later tests have every node.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clitools import REPO, Cli, events, final_hash, reached_step
from nodefault import freeze_node, kill_node, restore_nodes, signal_all, wait_nodes_run_step

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]  # a node dies; start.sh brings it back

SPEC = REPO / "jobs" / "example.yaml"
TRAIN = ["--epochs", "2", "--steps-per-epoch", "6", "--ckpt-every", "2", "--sleep-per-step", "0.5"]
TARGET_S = 30.0  # node death -> every surviving rank stopped and the attempt decided
# Node death -> every rank of the next attempt did a step, the node still dead: Slurm gives up on it only after
# SlurmdTimeout (300 s here) and holds a requeue (or a dependent job) until then. Well below that, not the ≤ 90 s
# target itself, which benchmarks/bench_node_loss.py measures (timings are measured there, not asserted here).
RESUMED_S = 200.0
FAULT_AT_STEP = 5  # after the checkpoint of step 4


def submit(cli: Cli, runs: Path, *extra: str) -> tuple[str, Path]:
    return cli.submit(SPEC, "--set", f"run_dir={runs}", "--set", f"args={json.dumps(TRAIN)}", *extra)


def resumed_at(attempt_dir: Path) -> float | None:
    """When the last rank of the attempt did its first step (each rank's progress history: [t, step, ...])."""
    firsts = []
    for path in attempt_dir.glob("progress-*.json"):
        firsts += json.loads(path.read_text()).get("history", [])[:1]
    return max(point[0] for point in firsts) if len(firsts) == 4 else None  # 2 nodes x 2 ranks


def outcome(cli: Cli, job_id: str, run_dir: Path) -> tuple[dict[str, Any], float | None, str]:
    """The run's final status, when its next attempt resumed, and what squeue says of its first job then."""
    status = cli.wait_terminal(job_id, timeout=300)
    queue = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False)
    return status, resumed_at(run_dir / "attempt-1"), queue.stdout.strip()


def first(run_dir: Path, name: str, **match: object) -> dict[str, Any] | None:
    return next((e for e in events(run_dir) if e["event"] == name and match.items() <= e.items()), None)


@pytest.fixture
def nodes_work_again() -> Iterator[None]:
    """After the test (and after its jobs are cancelled, this fixture being set up first): both nodes of the
    default partition run a step again (nodefault.wait_nodes_run_step)."""
    yield
    wait_nodes_run_step()


# freeze: found by the launchers' network beat alone (Slurm sees a frozen node as up): CI runs it on 22.05 only;
# death: Slurm's side (the node's slurmd gone, srun's end) differs between versions, so it runs on both.
@pytest.mark.parametrize("fault_kind", ["death", pytest.param("freeze", marks=pytest.mark.one_slurm_version)])
def test_lost_node_is_found_within_30_s_and_the_run_resumes_to_the_same_weights(  # type: ignore[no-untyped-def]
    fault_kind: str, tmp_path: Path, nodes_work_again: None, cleanup_jobs
) -> None:
    cli = Cli(tmp_path / "home")
    pids: list[int] = []
    ref_id, ref_dir = submit(cli, tmp_path / "ref", "--set", "name=reference", "--backend", "local")
    where = ["--set", "partition=scale"] if fault_kind == "death" else []
    job_id, run_dir = submit(cli, tmp_path / "runs", *where)
    cleanup_jobs(job_id)
    attempt = run_dir / "attempt-0"
    try:
        cli.wait_for(
            lambda: reached_step(attempt, FAULT_AT_STEP),
            timeout=120,
            what=f"step {FAULT_AT_STEP}",
        )
        victim = json.loads((attempt / "node-1.json").read_text())["node"]  # not the batch host (node rank 0)
        fault, pids = (kill_node if fault_kind == "death" else freeze_node)(victim, job_id)
        cli.wait_for(lambda: first(run_dir, "decision", attempt=0) is not None, timeout=120, what="the decision")
        decided = first(run_dir, "decision", attempt=0)
        if fault_kind == "death":  # the node stays dead until the run has ended
            status, resumed, queue = outcome(cli, job_id, run_dir)
    finally:
        signal_all(pids, signal.SIGCONT)  # a frozen process Slurm has not killed yet goes on (and is killed)
        restore_nodes()
    if fault_kind == "freeze":
        status, resumed, queue = outcome(cli, job_id, run_dir)
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
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, events(run_dir)
    # The next attempt is a successor job, not this job again (which Slurm holds while the node is dead).
    successor = first(run_dir, "chain-submit", attempt=0)
    assert successor is not None and successor["why"] == "a lost node", events(run_dir)
    assert queue in ("", "COMPLETING"), queue  # the first job is not requeued behind the run's back
    assert resumed is not None, events(run_dir)
    print(f"next attempt's first step {resumed - fault:.1f} s after the node {fault_kind}")
    if fault_kind == "death":
        hosts = {json.loads(p.read_text())["node"] for p in (run_dir / "attempt-1").glob("node-*.json")}
        assert victim not in hosts and len(hosts) == 2, hosts
        assert resumed - fault <= RESUMED_S, resumed - fault
    assert cli.wait_terminal(ref_id, timeout=300)["state"] == "COMPLETED"
    assert final_hash(run_dir) is not None and final_hash(run_dir) == final_hash(ref_dir)
