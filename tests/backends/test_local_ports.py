"""Local jobs of different registries never share a rendezvous port (the real local backend, torch-free stand-in).

Each DDPCTL_HOME counts its own local job numbers, so two users (or two homes) both run a `local-1`; a port hashed
from the job number, as on Slurm, put both on the same 127.0.0.1 port and one of them failed at rendezvous."""

from __future__ import annotations

from pathlib import Path

from clitools import REPO, Cli, events, write_spec


def launched_ports(run_dir: Path) -> set[int]:
    return {int(e["dist"]["MASTER_PORT"]) for e in events(run_dir) if e["event"] == "launch"}


def test_two_homes_both_local_1_get_different_ports(tmp_path: Path) -> None:
    jobs = []
    for home in ("alice", "bob"):
        cli = Cli(tmp_path / home, cwd=REPO)
        spec = write_spec(
            tmp_path / f"{home}.yaml",
            name="ports",
            script=str(REPO / "ddpctl/node/standin.py"),
            args=["--steps", "20", "--step-s", "0.05"],
            nodes=2,
            nproc_per_node=1,
            backend="local",
            run_dir=str(tmp_path / home / "runs"),
            env={"DDPCTL_STANDIN": "1"},
        )
        jobs.append((cli, *cli.submit(spec)))
    for cli, job_id, _ in jobs:
        assert job_id == "local-1"
        assert cli.wait_terminal(job_id)["state"] == "COMPLETED"
    (alice,), (bob,) = (launched_ports(run_dir) for _, _, run_dir in jobs)  # one port for both nodes of a job
    assert alice != bob
