"""Never go back to a bad node: a script that exits 1 only on one named node, `max_failures: 3`, 2 nodes.

Once the same node failed the run twice for the same cause, it is excluded, the next attempt runs elsewhere and
the run completes (before: every attempt went back to that node and the run ended FAILED). On Slurm the job runs
in `scale` (every node of the test cluster), where Slurm places a 2-node job on node1 and node2 when they are
free; the requeued job's ExcNodeList says the rest. On the local backend the simulated nodes are local1, local2:
the third attempt runs on local1 and local3.

No torch in the script: each attempt costs torchrun's start and a requeue's hold (cred_expire + 1 s = 6 s here),
so the Slurm test stays near a minute.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clitools import Cli, events, write_spec
from slurmtools import job_info

from ddpctl.slurm.hostlist import expand

# The rank on the bad node fails at once; where the bad node is one of the attempt's nodes, the others wait to be
# ended by its failure (srun's --kill-on-bad-exit, the local supervisor), as a node's own fault ends a real job:
# a rank that finished instead would leave its torchrun waiting for the failed node at its exit barrier.
SCRIPT = """
import os, socket, sys, time
from ddpctl.slurm.hostlist import expand
node = os.environ.get("DDPCTL_NODE") or socket.gethostname()
print(f"rank {os.environ.get('RANK')} on {node}", flush=True)
if node == sys.argv[1]:
    sys.exit("this node is bad")
time.sleep(120 if sys.argv[1] in expand(os.environ["SLURM_JOB_NODELIST"]) else 1)
"""


def bad_node_spec(tmp_path: Path, bad: str, backend: str, **fields: Any) -> Path:
    script = tmp_path / "code" / "bad_node.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRIPT)
    return write_spec(
        tmp_path / "bad-node.yaml",
        name="bad-node",
        script=str(script),
        args=[bad],
        nodes=2,
        nproc_per_node=1,
        gpus_per_node=0,
        run_dir=str(tmp_path / "runs"),
        backend=backend,
        requeue={"max_failures": 3},
        **fields,
    )


def attempt_nodes(run_dir: Path) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for event in events(run_dir):
        if event["event"] == "launch":
            found.setdefault(event["attempt"], set()).add(event["node"])
    return found


def check_the_run(cli: Cli, job_id: str, run_dir: Path, bad: str, spec: Path) -> None:
    status = cli.wait_terminal(job_id, timeout=180)
    trail = [
        {k: v for k, v in e.items() if k not in ("argv", "dist", "gpus")}
        for e in events(run_dir)
        if e["event"] in ("launch", "node-exit", "decision", "node-excluded")
    ]
    assert (status["state"], status["restarts"]) == ("COMPLETED", 2), trail
    nodes = attempt_nodes(run_dir)
    assert bad in nodes[0] and bad in nodes[1] and bad not in nodes[2], nodes
    found = [e for e in events(run_dir) if e["event"] == "node-excluded"]
    excluded = [(e["node"], e["cause"], e["attempt"], e["applied"]) for e in found]
    assert excluded == [(bad, "script-error", 1, True)], trail
    decisions = [(e["action"], e["kind"]) for e in events(run_dir) if e["event"] == "decision"]
    assert decisions == [("requeue", "failure"), ("requeue", "failure"), ("finish", None)], trail
    text = cli.run("status", job_id).stdout
    assert f"excluded nodes: {bad} (script-error on {bad} in 2 attempts, after attempt 1)" in text, text
    assert status["excluded_nodes"] == [bad]
    text = cli.run("doctor", str(spec), check=False).stdout  # a new submit would start without the exclusion
    assert f"[WARN] excluded nodes: job {job_id} excluded {bad} after failures there" in text, text


@pytest.mark.slurm
def test_a_node_that_fails_twice_is_excluded_on_slurm_and_the_run_completes(
    tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    cli = Cli(tmp_path / "home")
    bad = "node1"  # the lowest node of `scale`: Slurm's first choice for a 2-node job on a free cluster
    spec = bad_node_spec(tmp_path, bad, "sbatch", partition="scale", time="00:05:00")
    job_id, run_dir = cli.submit(spec)
    cleanup_jobs(job_id)
    check_the_run(cli, job_id, run_dir, bad, spec)
    info = job_info(job_id)  # Slurm's own record of the job's last run
    assert info.get("ExcNodeList") == bad and bad not in expand(info.get("NodeList", "")), info


@pytest.mark.torchrun
def test_a_node_that_fails_twice_is_excluded_on_the_local_backend_and_the_run_completes(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    spec = bad_node_spec(tmp_path, "local2", "local")
    job_id, run_dir = cli.submit(spec)
    check_the_run(cli, job_id, run_dir, "local2", spec)
    assert attempt_nodes(run_dir)[2] == {"local1", "local3"}
