"""The local backend end to end, with no Slurm binary reachable: the README's main job experience.

Runs the example trainer on 2 simulated nodes x 2 processes (Gloo on loopback) through the real CLI: submit,
status, logs, preempt → agreed checkpoint → resume on a new attempt with the same final hash, cancel.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, example_spec, final_hash

pytestmark = pytest.mark.torchrun

STEP_LINE = re.compile(r"\[example\] step (\d+)/")


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    # PATH holds nothing but an empty directory: no sbatch/srun/scontrol can be found, by us or by torch.
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty)})


def steps_logged(log: Path) -> list[int]:
    return [int(m.group(1)) for m in STEP_LINE.finditer(log.read_text())] if log.exists() else []


def test_no_slurm_on_path(cli: Cli) -> None:
    assert shutil.which("sbatch", path=cli.env["PATH"]) is None
    assert shutil.which("srun", path=cli.env["PATH"]) is None


def test_sbatch_backend_without_sbatch_says_what_to_do(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("submit", str(example_spec(tmp_path, "nosbatch")), "--backend", "sbatch", check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--backend local" in done.stderr
    assert not (tmp_path / "runs" / "nosbatch").exists() or not list((tmp_path / "runs" / "nosbatch").iterdir())


def test_preempt_and_resume_reaches_the_uninterrupted_hash(cli: Cli, tmp_path: Path) -> None:
    reference_id, reference_dir = cli.submit(example_spec(tmp_path, "reference"))
    # In the NCCL-shaped lane: the default group refuses CPU tensors as NCCL does (the example gives its gradients a
    # Gloo group), so the stop, marker, checkpoint and resume must use ddpctl's control group only; same weights.
    lane = ("--backend", "cuda:gloo")
    job_id, run_dir = cli.submit(example_spec(tmp_path, "interrupted", "--sleep-per-step", "0.5", *lane))
    rank0 = run_dir / "attempt-0" / "rank-0.log"
    cli.wait_for(lambda: len(steps_logged(rank0)) >= 1, timeout=180, what="the first training step")
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=300)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), events(run_dir)
    assert cli.wait_terminal(reference_id, timeout=300)["state"] == "COMPLETED"

    stop = [e for e in events(run_dir) if e["event"] == "stop"]
    assert len(stop) == 1 and stop[0]["attempt"] == 0
    first, second = steps_logged(rank0), steps_logged(run_dir / "attempt-1" / "rank-0.log")
    assert first and second and max(first) == stop[0]["step"] < min(second)
    assert sorted(first + second) == list(range(1, max(second) + 1)), "a step was skipped or computed twice"
    for rank in range(4):
        assert f"stop agreed at step {stop[0]['step']}" in (run_dir / "attempt-0" / f"rank-{rank}.log").read_text()
    assert final_hash(run_dir) is not None and final_hash(run_dir) == final_hash(reference_dir)

    merged = cli.run("logs", job_id, "--attempt", "all", "--no-color").stdout
    assert "-- attempt 1 --" in merged
    # Under c10d the ranks' placement is torchrun's choice (both simulated nodes share 127.0.0.1, so it goes
    # by pid): the prefixes must match what each worker recorded, for every rank of both attempts.
    for attempt in (0, 1):
        placed = {
            json.loads(p.read_text())["rank"]: json.loads(p.read_text())["node"]
            for p in (run_dir / f"attempt-{attempt}").glob("rank-*.json")
        }
        assert sorted(placed) == [0, 1, 2, 3] and set(placed.values()) == {"local1", "local2"}
        expected = {f"[a{attempt} {node} r{rank}]" for rank, node in placed.items()}
        assert expected <= set(re.findall(r"\[a\d local\d r\d\]", merged))
    decisions = [e for e in events(run_dir) if e["event"] == "decision"]
    assert [(d["action"], d["kind"]) for d in decisions] == [("requeue", "preemption"), ("finish", None)]
    told = cli.run("status", job_id).stdout
    assert "NOT ACKNOWLEDGED" not in told and "script-error" not in told, told


def test_cancel_a_running_local_job(cli: Cli, tmp_path: Path) -> None:
    job_id, run_dir = cli.submit(example_spec(tmp_path, "cancelme", "--sleep-per-step", "2"))
    cli.wait_for(lambda: cli.status(job_id)["state"] == "RUNNING", what="RUNNING")
    cli.run("cancel", job_id)
    # Issue 45: right after `cancel` returned, `status` said RUNNING while the nodes were still going down.
    assert cli.status(job_id)["state"] == "CANCELLED"
    listed = cli.run("list", "--json").stdout
    assert f'"job_id": "{job_id}"' in listed and '"state": "CANCELLED"' in listed
    # The supervisor is gone (a zombie awaiting its reaper counts as gone).
    pid = int((run_dir / "supervisor.pid").read_text().split()[0])
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3]
