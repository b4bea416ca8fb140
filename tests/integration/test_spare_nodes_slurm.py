"""spare_nodes on the real local Slurm cluster: a 2-node run holds a third node (`spare_nodes: 1`, so Slurm
allocates 3 with `--no-kill`); one of its training nodes dies mid-training (slurmd and every process of the job
there SIGKILLed). The launchers find it lost, the attempt is decided, and the batch shell starts the next attempt
inside the same job on the surviving node and the spare, without a requeue: no queue wait, no requeue hold. The
run ends with the uninterrupted run's final weights, and the time from the fault to the first resumed step is
printed (issue target: 60 s).

The job runs in `scale` with the user's exclusion leaving node3..node6, away from the nodes other tests use.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from clitools import REPO, Cli, events, final_hash, reached_step
from nodefault import kill_node, restore_nodes, wait_nodes_run_step

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]  # a node dies

SPEC = REPO / "jobs" / "example.yaml"
TRAIN = ["--epochs", "2", "--steps-per-epoch", "6", "--ckpt-every", "2", "--sleep-per-step", "0.5"]
WHERE = ["--set", "partition=scale", "--set", "sbatch.exclude=node[1-2],node[7-16]", "--set", "time=00:10:00"]
FAULT_AT_STEP = 5  # after the checkpoint of step 4
TARGET_S = 60.0  # node dead -> first step of the restarted attempt


def first(run_dir: Path, name: str, **match: object) -> dict[str, Any] | None:
    return next((e for e in events(run_dir) if e["event"] == name and match.items() <= e.items()), None)


@pytest.fixture
def nodes_work_again() -> Iterator[None]:
    yield
    wait_nodes_run_step()


def test_a_dead_node_is_replaced_by_the_spare_inside_the_job_without_a_requeue(
    tmp_path: Path, nodes_work_again: None, cleanup_jobs: Callable[[str], str]
) -> None:
    cli = Cli(tmp_path / "home")
    train = ["--set", f"args={json.dumps(TRAIN)}"]
    ref = ["--set", f"run_dir={tmp_path / 'ref'}", "--set", "name=reference", "--backend", "local"]
    ref_id, ref_dir = cli.submit(SPEC, *ref, *train)
    job_id, run_dir = cli.submit(
        SPEC, "--set", f"run_dir={tmp_path / 'runs'}", *train, *WHERE, "--set", "spare_nodes=1"
    )
    cleanup_jobs(job_id)
    assert "#SBATCH --nodes=3" in (run_dir / "job.sbatch").read_text()
    attempt = run_dir / "attempt-0"
    try:
        cli.wait_for(
            lambda: reached_step(attempt, FAULT_AT_STEP),
            timeout=180,
            what=f"step {FAULT_AT_STEP}",
        )
        trained = {json.loads((attempt / f"node-{r}.json").read_text())["node"] for r in (0, 1)}
        victim = json.loads((attempt / "node-1.json").read_text())["node"]  # not the batch host (node rank 0)
        fault, _ = kill_node(victim, job_id)
        cli.wait_for(lambda: first(run_dir, "resume", attempt=1) is not None, timeout=120, what="attempt 1's resume")
    finally:
        restore_nodes()
    status = cli.wait_terminal(job_id, timeout=300)
    decided, spare = first(run_dir, "decision", attempt=0), first(run_dir, "spare-restart", attempt=0)
    resumed = first(run_dir, "resume", attempt=1)
    assert decided is not None and spare is not None and resumed is not None, events(run_dir)
    print(f"node death -> decided {decided['t'] - fault:.1f} s, resumed step {resumed['t'] - fault:.1f} s")
    assert (decided["action"], decided["kind"], decided["cause"]) == ("requeue", "node_failure", "node-lost"), decided
    # The next attempt ran in this job on the survivor and the spare, never on the dead node.
    survivor = (trained - {victim}).pop()
    assert spare["job_id"] == job_id and victim not in spare["nodes"] and survivor in spare["nodes"], spare
    assert spare["avoided"] == [victim], spare
    restarted = {json.loads((run_dir / "attempt-1" / f"node-{r}.json").read_text())["node"]: r for r in (0, 1)}
    assert set(restarted) == set(spare["nodes"]), restarted
    # No preflight before torchrun: the survivor trained seconds ago; the spare checked itself beside torchrun.
    (new_node,) = set(spare["nodes"]) - {survivor}
    assert [e for e in events(run_dir) if e["event"] == "preflight"] == [], events(run_dir)
    out = (run_dir / "slurm.out").read_text()
    assert f"ddpctl launch [{survivor}]: preflight check skipped: this node trained" in out, out
    assert f"ddpctl launch [{new_node}]: preflight check beside torchrun: a new node in place of {victim}" in out, out
    assert (run_dir / "attempt-1" / f"recheck-node-{restarted[new_node]}.log").exists()
    # No requeue: Slurm started the job once; the resumed step is the newest complete checkpoint's next.
    assert [e["job_id"] for e in events(run_dir) if e["event"] == "attempt-start"] == [job_id, job_id]
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True)
    assert " Restarts=0 " in shown.stdout, shown.stdout
    assert resumed["step"] >= 4, resumed
    assert status["state"] == "COMPLETED", (status, events(run_dir))
    assert cli.wait_terminal(ref_id, timeout=300)["state"] == "COMPLETED"
    assert final_hash(run_dir) is not None and final_hash(run_dir) == final_hash(ref_dir)
    assert f"restarted inside the job on {','.join(spare['nodes'])}" in cli.run("status", job_id).stdout
