"""`ddpctl submit/status/cancel/env` against the real local Slurm cluster (2 nodes, own network namespaces)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from clitools import ALLREDUCE_SCRIPT, Cli, events, results, write_spec

pytestmark = pytest.mark.slurm


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home", cwd=tmp_path)


def allreduce_spec(tmp_path: Path, **extra: object) -> Path:
    (tmp_path / "allreduce.py").write_text(ALLREDUCE_SCRIPT)
    fields = {
        "name": "allreduce",
        "script": "allreduce.py",
        "nodes": 2,
        "nproc_per_node": 2,
        "time": "00:05:00",
        "partition": "debug",
        **extra,
    }
    return write_spec(tmp_path / "allreduce.yaml", **fields)


def test_two_nodes_form_one_world(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    done = cli.run("submit", str(allreduce_spec(tmp_path)), "--wait")
    job_id = cleanup_jobs(done.stdout.split("job ", 1)[1].split()[0])
    run_dir = Path(done.stdout.split("run dir:", 1)[1].split()[0])
    found = sorted(results(run_dir), key=lambda r: r["rank"])
    assert [r["rank"] for r in found] == [0, 1, 2, 3]
    assert {r["sum"] for r in found} == {10.0} and {r["world"] for r in found} == {4}
    assert {r["host"]: r["group_rank"] for r in found} == {"node1": 0, "node2": 1}
    # MASTER_ADDR names node1 by its own address (never loopback; static rendezvous passes the hostname, c10d
    # the address), and node2's ranks reached it: their sum is right.
    assert {socket.gethostbyname(r["master_addr"]) for r in found} == {socket.gethostbyname("node1")}
    for rank in range(4):
        assert "RESULT" in (run_dir / "attempt-0" / f"rank-{rank}.log").read_text()
    status = cli.status(job_id)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 0)
    assert json.loads((run_dir / "attempt-0" / "node-1.json").read_text())["node"] == "node2"
    assert "slurm.out" in {p.name for p in run_dir.iterdir()}


def test_wait_returns_the_jobs_exit_status(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "fail.py").write_text("import sys\nprint('failing on purpose')\nsys.exit(3)\n")
    spec = write_spec(tmp_path / "fail.yaml", name="fail", script="fail.py", nodes=2, nproc_per_node=1, time="00:05:00")
    done = cli.run("submit", str(spec), "--wait", check=False)
    cleanup_jobs(done.stdout.split("job ", 1)[1].split()[0])
    assert done.returncode == 1, done.stdout + done.stderr  # torchrun reports a failed worker as 1
    assert "FAILED" in done.stdout


def test_cancel_a_running_job(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "sleep.py").write_text("import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n")
    spec = write_spec(tmp_path / "sleep.yaml", name="sleeper", script="sleep.py", nodes=2, time="00:10:00")
    job_id, _ = cli.submit(spec)
    cleanup_jobs(job_id)
    cli.wait_for(lambda: cli.status(job_id)["state"] == "RUNNING", what="RUNNING")
    cli.run("cancel", "sleeper")
    assert cli.wait_terminal(job_id, timeout=60)["state"] == "CANCELLED"


def test_rejected_submission_leaves_nothing_behind(cli: Cli, tmp_path: Path) -> None:
    # An unknown partition is refused before sbatch (preflight, exit 2); a feature no node has, by sbatch itself.
    spec = str(allreduce_spec(tmp_path))
    done = cli.run("submit", spec, "--set", "partition=nosuch", check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "partition: got 'nosuch', expected one of debug" in done.stderr, done.stderr
    done = cli.run("submit", spec, "--set", "sbatch.constraint=nosuchfeature", check=False)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if not line.startswith("ddpctl: warning:")]
    assert errors == [errors[0]] and "sbatch failed" in errors[0], done.stderr  # one line (the script warning aside)
    assert not (cli.home / "registry.jsonl").exists()
    runs = tmp_path / "runs" / "allreduce"
    assert not runs.exists() or list(runs.iterdir()) == []


def test_env_inside_srun_matches_the_launcher(cli: Cli, tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    probe = (
        f'srun --ntasks-per-node=1 bash -c \'"$0" -m ddpctl env --json --nproc-per-node 2 '
        f'> {tmp_path}/env-$SLURM_NODEID.json\' "$(command -v python)"'
    )
    spec = allreduce_spec(tmp_path, setup=[probe])
    done = cli.run("submit", str(spec), "--wait")
    cleanup_jobs(done.stdout.split("job ", 1)[1].split()[0])
    run_dir = Path(done.stdout.split("run dir:", 1)[1].split()[0])
    launched = {e["node"]: e["dist"] for e in events(run_dir) if e["event"] == "launch"}
    for node_id, node in ((0, "node1"), (1, "node2")):
        probed = json.loads((tmp_path / f"env-{node_id}.json").read_text())
        keys = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "NPROC_PER_NODE", "WORLD_SIZE", "RESTART_COUNT")
        assert {k: probed[k] for k in keys} == {k: launched[node][k] for k in keys}
    assert launched["node2"]["NODE_RANK"] == 1
