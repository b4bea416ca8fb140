"""The control plane at 16 nodes on the real local Slurm cluster, training played by the torch-free stand-in.

Partition `scale` spans every node of the test cluster (16 by default; tests/cluster/README.md). Each node's
`ddpctl launch` starts `ddpctl.node.standin` (spec env DDPCTL_STANDIN=1) for 4 simulated ranks: 64 ranks whose
logs, stop handling, agreed step, stopped marker and resume are what the real batch script, launchers, fan-out
and decision see. A regression that makes any per-node step slow or lossy at 16 nodes fails here.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, write_spec

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]  # every node of the cluster

NODES, RANKS = 16, 4
STEPS, STEP_S = 150, 0.1
STANDIN = REPO / "ddpctl" / "node" / "standin.py"
AGREED_RE = re.compile(r"^\[standin\] agreed stop at step (\d+)", re.M)
RESUMED_RE = re.compile(r"^\[standin\] resumed from step (\d+)", re.M)


def read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def launches(run_dir: Path, attempt: int) -> int:
    return sum(1 for e in events(run_dir) if e["event"] == "launch" and e.get("attempt") == attempt)


def test_sixteen_nodes_stop_at_one_step_requeue_and_resume(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home", cwd=tmp_path)
    spec = write_spec(
        tmp_path / "scale.yaml",
        name="scale16",
        script=str(STANDIN),
        nodes=NODES,
        nproc_per_node=RANKS,
        time="00:10:00",
        partition="scale",
        args=["--steps", str(STEPS), "--step-s", str(STEP_S)],
        env={"DDPCTL_STANDIN": "1"},
        requeue={"enabled": True, "signal": "USR2", "lead_s": 60, "max_preemptions": 1},
    )
    job_id, run_dir = cli.submit(spec)
    cleanup_jobs(job_id)
    cli.wait_for(lambda: launches(run_dir, 0) == NODES, timeout=120, what=f"{NODES} launchers")
    cli.wait_for(
        lambda: "step 5/" in read(run_dir / "attempt-0" / f"rank-{NODES * RANKS - 1}.log"),
        timeout=60,
        what="the last rank's 5th step",
    )
    asked = time.time()
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=180)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), status

    stopped = json.loads((run_dir / "attempt-0" / "stopped.json").read_text())
    for rank in range(NODES * RANKS):
        before = (run_dir / "attempt-0" / f"rank-{rank}.log").read_text()
        after = (run_dir / "attempt-1" / f"rank-{rank}.log").read_text()
        assert AGREED_RE.findall(before) == [str(stopped["step"])], (rank, before[-300:])
        assert RESUMED_RE.findall(after) == [str(stopped["step"])], (rank, after[:300])
        assert f"step {stopped['step'] + 1}/{STEPS}" in after and f"finished {STEPS} steps" in after
    # The fan-out reached every node's launcher (its stop-signal event); every node's ranks saw the stop (by
    # the signal, the stop file, or the other nodes' agreement, as ranks do through StopAgreement's all-reduce).
    signalled = {e["node"] for e in events(run_dir) if e["event"] == "stop-signal" and e["attempt"] == 0}
    assert signalled == {f"node{k}" for k in range(1, NODES + 1)}
    seen = [json.loads(p.read_text()) for p in (run_dir / "attempt-0" / "standin").glob("seen-node-*.json")]
    assert len(seen) == NODES
    assert max(s["t"] for s in seen) - asked < 5.0  # generous: a shared 2-core machine; benchmarks time it
    decisions = [(e["attempt"], e["action"], e["kind"]) for e in events(run_dir) if e["event"] == "decision"]
    assert decisions == [(0, "requeue", "preemption"), (1, "finish", None)]
    exits = [e for e in events(run_dir) if e["event"] == "node-exit"]
    assert len(exits) == 2 * NODES and {e["exit"] for e in exits} == {0}
