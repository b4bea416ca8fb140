"""Nodes check themselves before training (issue 26 item 7, `health.preflight`).

On Slurm: a 3-node job whose second node cannot reach the others' data ports (`nodefault.cut_data_ports`: new TCP
connections to or from ephemeral ports dropped in its namespace, Slurm's own ports open — a broken fabric that
Slurm does not see). Its check fails to reach node 0's store within the bound, the others' fail to form the
group; the attempt ends before torchrun with cause `preflight` blamed on that node, which is excluded; the requeued
attempt checks its new nodes again, passes and completes. The job runs in `scale` with the user's exclusion leaving
node3..node6, where Slurm places a 3-node job on node3..node5 when they are free (a job on node4..node6 makes node4
node 0, which the rule blames when none of the others reaches it).

On the local backend: `preflight: true` checks the simulated nodes on every attempt and `status` says its cost.
A site's `health.node_check` that fails on local2 only fails that node's check (stage `site`, its exit status and
last line in the event) before torchrun starts; local2 is excluded and the requeued attempt completes on local1 and
local3 (157 s at a load of 14 on 2 cores: two attempts, each checking two nodes and importing torch in each).

The script needs no torch: each attempt costs the check (torch's import), torchrun's start and, on Slurm, a
requeue's hold (cred_expire + 1 s = 6 s here).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clitools import Cli, events, write_spec
from nodefault import cut_data_ports
from slurmtools import job_info

from ddpctl.slurm.hostlist import expand

SCRIPT = """
import os, socket, time
print(f"rank {os.environ.get('RANK')} on {os.environ.get('DDPCTL_NODE') or socket.gethostname()}", flush=True)
time.sleep(1)
"""
BAD = "node4"


def check_spec(tmp_path: Path, backend: str, nodes: int, health: dict[str, Any] | None = None, **fields: Any) -> Path:
    script = tmp_path / "code" / "check_me.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(SCRIPT)
    return write_spec(
        tmp_path / "check.yaml",
        name="check",
        script=str(script),
        nodes=nodes,
        nproc_per_node=1,
        gpus_per_node=0,
        run_dir=str(tmp_path / "runs"),
        backend=backend,
        health={"preflight": True, "preflight_timeout_s": 15, **(health or {})},
        **fields,
    )


def trail(run_dir: Path) -> list[dict[str, Any]]:
    keep = ("launch", "preflight", "node-exit", "decision", "node-excluded")
    return [
        {k: v for k, v in e.items() if k not in ("argv", "dist", "gpus")} for e in events(run_dir) if e["event"] in keep
    ]


def checks(run_dir: Path, attempt: int) -> dict[str, tuple[bool, str]]:
    found = [e for e in events(run_dir) if e["event"] == "preflight" and e["attempt"] == attempt]
    return {e["node"]: (e["ok"], e["stage"]) for e in found}


@pytest.mark.slurm
@pytest.mark.one_slurm_version  # the check is the launchers' own; CI runs it on 22.05 only (it passed on 24.11.5)
@pytest.mark.cluster_alone  # a node is cut off
def test_a_node_cut_off_from_the_others_fails_its_check_and_is_excluded_before_training(
    tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    cli = Cli(tmp_path / "home")
    spec = check_spec(
        tmp_path, "sbatch", 3, partition="scale", time="00:05:00", sbatch={"exclude": "node[1-2],node[7-16]"}
    )
    with cut_data_ports(BAD):
        job_id, run_dir = cli.submit(spec)
        cleanup_jobs(job_id)
        status = cli.wait_terminal(job_id, timeout=240)
    record = trail(run_dir)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), record
    first = checks(run_dir, 0)
    assert BAD in first and first[BAD][0] is False, record
    assert not any(e["event"] == "launch" and e["attempt"] == 0 for e in record), "torchrun started after a failure"
    decision = next(e for e in record if e["event"] == "decision" and e["attempt"] == 0)
    assert (decision["cause"], decision["cause_node"], decision["kind"]) == ("preflight", BAD, "node_failure"), record
    excluded = [(e["node"], e["cause"], e["applied"]) for e in record if e["event"] == "node-excluded"]
    assert excluded == [(BAD, "preflight", True)], record
    second = checks(run_dir, 1)
    assert len(second) == 3 and BAD not in second and all(ok for ok, _ in second.values()), record
    text = cli.run("status", job_id).stdout
    assert f"preflight check, attempt 0: failed on {BAD} (reach: could not reach node 0's store" in text, text
    assert "torchrun not started" in text, text
    assert "preflight check, attempt 1: 3 node(s) passed in" in text, text
    assert f"attempt 0 ended by preflight: {BAD}" in text, text
    info = job_info(job_id)
    assert BAD in expand(info.get("ExcNodeList", "")) and BAD not in expand(info.get("NodeList", "")), info


@pytest.mark.torchrun
def test_the_local_backend_checks_its_simulated_nodes_and_status_says_the_cost(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    job_id, run_dir = cli.submit(check_spec(tmp_path, "local", 2))
    status = cli.wait_terminal(job_id, timeout=180)
    assert status["state"] == "COMPLETED", trail(run_dir)
    assert checks(run_dir, 0) == {"local1": (True, ""), "local2": (True, "")}, trail(run_dir)
    assert "preflight check, attempt 0: 2 node(s) passed in" in cli.run("status", job_id).stdout


# The site's check fails on the second simulated node only (DDPCTL_NODE: torchrun's environment, which the check has).
SITE_CHECK = (
    'echo "diag on $DDPCTL_NODE"; if [ "$DDPCTL_NODE" = local2 ]; then echo "GPU 1: memory test failed"; exit 3; fi'
)


@pytest.mark.torchrun
def test_a_site_check_that_fails_on_one_node_excludes_it_before_training_on_the_local_backend(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    job_id, run_dir = cli.submit(check_spec(tmp_path, "local", 2, health={"node_check": SITE_CHECK}))
    status = cli.wait_terminal(job_id, timeout=240)
    record = trail(run_dir)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), record
    first = [e for e in record if e["event"] == "preflight" and e["attempt"] == 0]
    bad = next(e for e in first if e["node"] == "local2")
    assert (bad["ok"], bad["stage"]) == (False, "site"), record
    assert bad["why"] == "node_check exited 3; last output: GPU 1: memory test failed", record
    assert bad["output"] == ["diag on local2", "GPU 1: memory test failed"], record
    assert not any(e["event"] == "launch" and e["attempt"] == 0 for e in record), "torchrun started after a failure"
    decision = next(e for e in record if e["event"] == "decision" and e["attempt"] == 0)
    assert (decision["cause"], decision["cause_node"], decision["kind"]) == ("preflight", "local2", "node_failure")
    assert [(e["node"], e["cause"]) for e in record if e["event"] == "node-excluded"] == [("local2", "preflight")]
    assert checks(run_dir, 1) == {"local1": (True, ""), "local3": (True, "")}, record
    text = cli.run("status", job_id).stdout
    assert "attempt 0 ended by preflight: local2: site: node_check exited 3; last output: GPU 1: memory" in text, text
