"""Faults found by the adversarial pass (issue 10), each reproduced on the real local backend."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from clitools import REPO, Cli, write_spec

pytestmark = pytest.mark.torchrun

ARGS = ["--epochs", "1", "--samples", "512", "--ckpt-every", "1"]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty)})


def spec(tmp_path: Path, name: str, **extra: object) -> Path:
    fields = {
        "name": name,
        "script": str(REPO / "jobs/example/train.py"),
        "args": ARGS,
        "nodes": 2,
        "nproc_per_node": 1,
        "run_dir": str(tmp_path / "runs"),
        "env": {"OMP_NUM_THREADS": "1"},
        "backend": "local",
        **extra,
    }
    return write_spec(tmp_path / f"{name}.yaml", **fields)


def test_a_run_with_another_world_size_never_deletes_the_first_runs_checkpoints(cli: Cli, tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    first, _ = cli.submit(spec(tmp_path, "f1"), "--set", f"checkpoint.dir={ck}", "--wait")
    assert cli.status(first)["state"] == "COMPLETED"
    saved = sorted(p.name for p in ck.iterdir())
    assert len(saved) >= 2, saved
    done = cli.run(
        "submit", str(spec(tmp_path, "f1")), "--set", f"checkpoint.dir={ck}", "--set", "nodes=1", "--wait", check=False
    )
    second = done.stdout.split("job ", 1)[1].split()[0]
    assert cli.status(second)["state"] == "FAILED", done.stdout
    assert sorted(p.name for p in ck.iterdir()) == saved
    errors = cli.run("logs", second, "--errors", "--no-color", check=False).stdout
    assert "shared with another run" in errors


def pids_of_run(run_dir: Path) -> list[int]:
    """Launchers (node-N.json) and workers (their first log line) of every attempt."""
    found = [json.loads(p.read_text())["pid"] for p in run_dir.glob("attempt-*/node-*.json")]
    for log in run_dir.glob("attempt-*/rank-*.log"):
        found += [int(m) for m in re.findall(r"^\[ddpctl\.worker\] .* pid=(\d+) ", log.read_text(), re.M)]
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_kill_9_of_the_supervisor_takes_its_nodes_down_and_status_tells_the_truth(cli: Cli, tmp_path: Path) -> None:
    job_id, run_dir = cli.submit(spec(tmp_path, "orphans", args=[*ARGS, "--sleep-per-step", "2"]))
    rank0 = run_dir / "attempt-0" / "rank-0.log"
    cli.wait_for(lambda: rank0.exists() and "step 1/" in rank0.read_text(), timeout=120, what="step 1")
    workers = pids_of_run(run_dir)
    assert len(workers) == 4 and all(alive(p) for p in workers)
    os.kill(int((run_dir / "supervisor.pid").read_text().split()[0]), signal.SIGKILL)
    status = cli.wait_terminal(job_id, timeout=90)
    # Terminal only once nothing of the job runs any more: no orphan trains on with nobody to decide.
    assert [p for p in workers if alive(p)] == []
    assert status["state"] == "FAILED" and "supervisor" in status["reason"], status
    done = cli.run("cancel", job_id, check=False)
    assert done.returncode != 0 and "already ended" in done.stderr and "nothing to cancel" in done.stderr


def test_a_stranger_with_the_supervisors_pid_is_neither_running_nor_cancelled(cli: Cli, tmp_path: Path) -> None:
    job_id, run_dir = cli.submit(spec(tmp_path, "stranger", args=["--epochs", "1", "--samples", "128"]), "--wait")
    assert cli.status(job_id)["state"] == "COMPLETED"
    stranger = subprocess.Popen(["sleep", "120"])
    try:
        started = Path(f"/proc/{stranger.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        for content in (f"{stranger.pid}\n", f"{stranger.pid} {started}\n"):  # old format; and even a matching one
            (run_dir / "supervisor.pid").write_text(content)
            assert cli.status(job_id)["state"] == "COMPLETED"
            done = cli.run("cancel", job_id, check=False)
            assert done.returncode != 0 and "already ended" in done.stderr and "nothing to cancel" in done.stderr
            assert stranger.poll() is None, "cancel signalled an unrelated process"
    finally:
        stranger.kill()
        stranger.wait()


def test_a_run_dir_with_braces_and_percent_runs_and_logs(cli: Cli, tmp_path: Path) -> None:
    runs = tmp_path / "r{x}{rank}{0}%j"
    job_id, run_dir = cli.submit(
        spec(tmp_path, "braces", run_dir=str(runs), args=["--epochs", "1", "--samples", "128"]), "--wait"
    )
    assert cli.status(job_id)["state"] == "COMPLETED"
    assert run_dir.parent.parent == runs
    assert sorted(p.name for p in (run_dir / "attempt-0").glob("rank-*.log")) == ["rank-0.log", "rank-1.log"]
    assert "[example] done" in cli.run("logs", job_id, "--no-color").stdout


KILL_ONE_RANK = """
import os, signal, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("ready", flush=True)
if dist.get_rank() == 1:
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)  # like the OOM killer: no traceback, no last words
for _ in range(400):
    dist.all_reduce(t)
    time.sleep(0.05)
"""


def test_errors_names_the_sigkilled_rank_not_the_gloo_collateral(cli: Cli, tmp_path: Path) -> None:
    script = tmp_path / "kill_one.py"
    script.write_text(KILL_ONE_RANK)
    # No infrastructure budget: the kill ends the run here (with the default one it would requeue: see below).
    killer = spec(tmp_path, "killer", script=str(script), args=[], nproc_per_node=2)
    done = cli.run("submit", str(killer), "--set", "requeue.max_node_failures=0", "--wait", check=False)
    job_id = done.stdout.split("job ", 1)[1].split()[0]
    status = cli.status(job_id)
    assert status["state"] == "FAILED"
    out = cli.run("logs", job_id, "--errors", "--no-color").stdout.splitlines()
    note = out[-2]
    assert note.startswith("-- first failure in attempt 0: rank 1 on local"), out
    assert "node-" in note and "killed by SIGKILL (exitcode -9)" in note, out
    assert any("Connection closed by peer" in line for line in out[:-2]), out  # the collateral is still shown
    # The decision names the kill, not the Gloo errors of the surviving ranks (issue 26 item 2), and charges it
    # to the infrastructure budget (item 3).
    decision = [e for e in events_of(tmp_path / "runs") if e["event"] == "decision"][-1]
    assert (decision["cause"], decision["cause_rank"], decision["cause_why"]) == (
        "rank-crash",
        1,
        "killed by SIGKILL",
    ), decision
    assert decision["kind"] == "node_failure" and str(decision["cause_node"]).startswith("local"), decision
    headline = "ended by rank-crash: rank 1 on local"
    assert out[-1].startswith(f"-- attempt 0 {headline}") and "killed by SIGKILL" in out[-1], out
    assert headline in status["reason"] and "killed by SIGKILL" in status["reason"], status
    human = cli.run("status", job_id).stdout
    assert f"attempt 0 {headline}" in human and "killed by SIGKILL" in human, human


def events_of(runs: Path) -> list[dict[str, object]]:
    (path,) = runs.glob("*/*/events.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_errors_after_torchruns_restarts_still_names_the_sigkill(cli: Cli, tmp_path: Path) -> None:
    """Issue 27 item 8: with max_restarts, every restart round dies the same way and torchrun gives up; the first
    failure `logs --errors` names is the SIGKILL that started it, not a later round's Gloo errors."""
    script = tmp_path / "kill_one.py"
    script.write_text(KILL_ONE_RANK)
    killer = spec(tmp_path, "restarts", script=str(script), args=[], nproc_per_node=2, max_restarts=1)
    done = cli.run("submit", str(killer), "--set", "requeue.max_node_failures=0", "--wait", check=False)
    job_id = done.stdout.split("job ", 1)[1].split()[0]
    assert cli.status(job_id)["state"] == "FAILED"
    out = cli.run("logs", job_id, "--errors", "--no-color").stdout.splitlines()
    assert out[-2].startswith("-- first failure in attempt 0: rank 1 on local"), out
    assert "killed by SIGKILL" in out[-2] and "killed by SIGKILL" in out[-1], out
    launcher_logs = "".join(p.read_text() for p in (tmp_path / "runs").glob("*/*/attempt-0/node-*.log"))
    assert launcher_logs.count("exitcode  : -9") + launcher_logs.count("exitcode: -9") >= 1, launcher_logs[-3000:]
