"""ddpctl on the production-like configuration of the local cluster (tests/cluster/README.md): task/cgroup +
task/affinity with ConstrainCores/ConstrainDevices/ConstrainRAMSpace, select/cons_tres, GPUs as GRES backed by
fake device files. A torch-free probe rank (probe/probe.py) records what each worker was given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clitools import Cli, events, results, write_spec

pytestmark = pytest.mark.slurm

PROBE = Path(__file__).parent / "probe" / "probe.py"


def probe_spec(tmp_path: Path, **fields: Any) -> Path:
    spec: dict[str, Any] = {
        "name": "probe",
        "script": str(PROBE),
        "nodes": 2,
        "nproc_per_node": 2,
        "time": "00:05:00",
        "run_dir": str(tmp_path / "runs"),
        "snapshot": "off",
        "requeue": {"max_failures": 0},
    }
    spec.update(fields)
    return write_spec(tmp_path / "probe.yaml", **spec)


def by_node(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    nodes: dict[str, list[dict[str, Any]]] = {}
    for result in sorted(found, key=lambda r: r["local_rank"]):
        nodes.setdefault(result["node"], []).append(result)
    return nodes


def test_every_worker_gets_every_cpu_the_job_holds_and_its_own_gpu(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home")
    spec = probe_spec(tmp_path, cpus_per_task=2, gpus_per_node=2, mem="1G")
    job_id, run_dir = cli.submit(spec)
    cleanup_jobs(job_id)
    assert cli.wait_terminal(job_id, timeout=180)["state"] == "COMPLETED", events(run_dir)
    nodes = by_node(results(run_dir))
    assert len(nodes) == 2 and all(len(ranks) == 2 for ranks in nodes.values()), nodes
    launches = {e["node"]: e for e in events(run_dir) if e["event"] == "launch"}
    for node, ranks in nodes.items():
        for rank in ranks:
            # Not the one CPU task/affinity binds a task to by default: every CPU of the job on this node.
            assert rank["job_cpus"] and len(rank["job_cpus"]) == 2, rank
            assert rank["affinity"] == rank["job_cpus"], rank
            # Slurm's CUDA_VISIBLE_DEVICES reaches the worker unchanged.
            assert rank["cuda_visible_devices"] == launches[node]["cuda_visible_devices"], (rank, launches[node])
        step_gpus = ranks[0]["step_gpus"].split(",")
        used = [step_gpus[int(r["cuda_visible_devices"].split(",")[r["local_rank"]])] for r in ranks]
        assert sorted(used) == sorted(step_gpus) and len(set(used)) == 2, ranks  # distinct, all of the node's
        assert [g["node_gpu"] for g in launches[node]["gpus"]] == [step_gpus[i] for i in range(2)]
        # The devices cgroup lets the step open both of its GPUs (ENXIO: allowed, no driver behind the file).
        assert ranks[0]["devices"] == {"nvidia0": "ENXIO", "nvidia1": "ENXIO"}, ranks[0]


def test_a_step_may_open_only_the_gpu_slurm_gave_it(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home")
    job_id, run_dir = cli.submit(probe_spec(tmp_path, nodes=1, nproc_per_node=1, gpus_per_node=1))
    cleanup_jobs(job_id)
    assert cli.wait_terminal(job_id, timeout=180)["state"] == "COMPLETED", events(run_dir)
    (rank,) = results(run_dir)
    given = f"nvidia{rank['step_gpus']}"
    assert rank["devices"][given] == "ENXIO", rank
    assert [v for k, v in rank["devices"].items() if k != given] == ["EPERM"], rank


def test_a_rank_over_its_memory_is_reported_out_of_memory(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home")
    spec = probe_spec(tmp_path, nodes=1, mem="1G", args=["--eat-mb", "3000", "--eat-rank", "1"])
    job_id, run_dir = cli.submit(spec)
    cleanup_jobs(job_id)
    status = cli.wait_terminal(job_id, timeout=180)
    assert status["state"] in ("FAILED", "OUT_OF_MEMORY"), status
    ooms = [e for e in events(run_dir) if e["event"] == "oom"]
    assert len(ooms) == 1 and ooms[0]["kills"] >= 1 and ooms[0]["limit_bytes"] == 1 << 30, ooms
    text = cli.run("status", job_id).stdout
    assert "out of memory in attempt 0 on node" in text and "memory limit 1024 MiB" in text, text
    errors = cli.run("logs", job_id, "--errors").stdout
    assert "rank 1" in errors and "out of memory: killed by SIGKILL" in errors, errors
    assert json.loads(cli.run("status", job_id, "--json").stdout)["oom"], "status --json has no oom entry"
