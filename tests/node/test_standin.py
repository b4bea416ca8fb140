"""The torch-free stand-in (test/benchmark seam): selected only by DDPCTL_STANDIN=1, and a full
preempt -> agreed stop -> requeue -> resume cycle through the real local backend (no torch, no Slurm)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from clitools import REPO, Cli, events, write_spec

from ddpctl.node.torchrun import torchrun_argv
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec

DIST = DistEnv(
    master_addr="n1",
    master_port=23456,
    node_rank=1,
    nnodes=2,
    nproc_per_node=3,
    world_size=6,
    rdzv_id="77.0",
    restart_count=0,
    job_id="77",
    node_name="n2",
    hosts=("n1", "n2"),
)


def test_only_the_flag_selects_the_standin() -> None:
    base = {"name": "j", "script": "/w/t.py", "args": ("--steps", "9"), "nodes": 2, "nproc_per_node": 3}
    cases = [
        ((), "ddpctl.node.agent"),
        ((("DDPCTL_STANDIN", "0"),), "ddpctl.node.agent"),
        ((("DDPCTL_STANDIN", "1"),), "ddpctl.node.standin"),
    ]
    for env, module in cases:
        argv = torchrun_argv(JobSpec(**{**base, "env": env}), DIST, "py")  # type: ignore[arg-type]
        assert (argv[:2], argv[3]) == (["py", "-c"], module)  # `-c` boot: no working directory on sys.path
    argv = torchrun_argv(JobSpec(**{**base, "env": (("DDPCTL_STANDIN", "1"),)}), DIST, "py")  # type: ignore[arg-type]
    assert argv[4:] == ["--nnodes=2", "--nproc-per-node=3", "--node-rank=1", "--steps", "9"]


def test_local_preempt_stops_every_rank_at_one_step_and_resumes(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home", cwd=REPO)
    spec = write_spec(
        tmp_path / "s.yaml",
        name="standin",
        script=str(REPO / "ddpctl/node/standin.py"),
        args=["--steps", "60", "--step-s", "0.05"],
        nodes=2,
        nproc_per_node=3,
        backend="local",
        run_dir=str(tmp_path / "runs"),
        env={"DDPCTL_STANDIN": "1"},
        requeue={"enabled": True, "signal": "USR2", "max_preemptions": 1},
    )
    job_id, run_dir = cli.submit(spec)
    log = run_dir / "attempt-0" / "rank-5.log"
    cli.wait_for(lambda: log.exists() and "step 3/" in log.read_text(), what="step 3 on rank 5")
    cli.run("preempt", job_id)
    assert cli.wait_terminal(job_id, timeout=120)["state"] == "COMPLETED"
    step = json.loads((run_dir / "attempt-0" / "stopped.json").read_text())["step"]
    for rank in range(6):
        before = (run_dir / "attempt-0" / f"rank-{rank}.log").read_text()
        after = (run_dir / "attempt-1" / f"rank-{rank}.log").read_text()
        assert re.findall(r"agreed stop at step (\d+)", before) == [str(step)]
        assert re.findall(r"resumed from step (\d+)", after) == [str(step)] and "finished 60 steps" in after
        assert json.loads((run_dir / "attempt-0" / f"rank-{rank}.json").read_text())["group_rank"] == rank // 3
    decisions = [(e["action"], e["kind"]) for e in events(run_dir) if e["event"] == "decision"]
    assert decisions == [("requeue", "preemption"), ("finish", None)]
