"""The example trainer under real torchrun (2 Gloo processes on CPU), driven like `ddpctl launch` drives it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from clitools import events as records

from ddpctl.node.localenv import local_network, local_node_env
from ddpctl.node.torchrun import node_plan
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import derive
from ddpctl.spec import JobSpec, RequeuePolicy

pytestmark = pytest.mark.torchrun

REPO = Path(__file__).resolve().parents[2]
TRAIN = "jobs/example/train.py"
BASE_ARGS = ("--epochs", "2", "--ckpt-every", "4")
STEP_RE = re.compile(r"^\[example\] step (\d+)/(\d+) ", re.MULTILINE)
HASH_RE = re.compile(r"^final-weights-sha256=([0-9a-f]{64})$", re.MULTILINE)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Attempt:
    run_dir: Path
    number: int
    proc: subprocess.Popen[bytes]

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.run_dir)

    def log(self, rank: int) -> str:
        path = self.layout.rank_log(self.number, rank)
        return path.read_text() if path.exists() else ""

    def wait(self, timeout: float = 90) -> int:
        return self.proc.wait(timeout=timeout)

    def wait_for_step(self, step: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while max(self.steps(), default=0) < step:
            assert self.proc.poll() is None, f"training ended before step {step}:\n{self.log(0)}"
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.05)

    def steps(self) -> list[int]:
        return [int(m.group(1)) for m in STEP_RE.finditer(self.log(0))]

    def final_hash(self) -> str:
        found = HASH_RE.findall(self.log(0))
        assert len(found) == 1, self.log(0)
        return str(found[0])

    def worker_pid(self, rank: int) -> int:
        match = re.search(r"^\[ddpctl\.worker\] rank=\d+ .* pid=(\d+)", self.log(rank), re.MULTILINE)
        assert match, self.log(rank)
        return int(match.group(1))


def start(run_dir: Path, number: int, *args: str, pg_backend: str = "") -> Attempt:
    args = (*args, "--backend", pg_backend) if pg_backend else args
    """Start torchrun as `ddpctl launch` would on a single local node (node rank 0): the argv and env come from
    the launcher's own `node_plan`, for the local backend's loopback network, on a free port."""
    layout = RunLayout(run_dir)
    spec = JobSpec(
        name="torchrun-test",
        script=TRAIN,
        args=tuple(args),
        nodes=1,
        nproc_per_node=2,
        env=(("OMP_NUM_THREADS", "1"),),
        requeue=RequeuePolicy(signal="USR2"),
    )
    dist, ifname, local_addr = local_network(derive(local_node_env(spec, 1, number, 0), spec.nproc_per_node))
    dist = dataclasses.replace(dist, master_port=free_port())
    plan = node_plan(spec, dist, layout, python=sys.executable, ifname=ifname, local_addr=local_addr)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DDPCTL_", "TORCHELASTIC_"))}
    layout.attempt_dir(number).mkdir(parents=True, exist_ok=True)
    out = (layout.node_log(number, 0)).open("ab")
    proc = subprocess.Popen(plan.argv, cwd=REPO, env={**env, **plan.env_dict()}, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    return Attempt(run_dir, number, proc)


def run(run_dir: Path, number: int, *args: str, pg_backend: str = "") -> Attempt:
    attempt = start(run_dir, number, *args, pg_backend=pg_backend)
    status = attempt.wait()
    assert status == 0, attempt.log(0) + attempt.log(1)
    return attempt


@pytest.fixture(scope="module")
def reference_hash(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two uninterrupted runs: the hash is the same (and is what every resumed run must reproduce)."""
    first = run(tmp_path_factory.mktemp("ref1"), 0, *BASE_ARGS)
    second = run(tmp_path_factory.mktemp("ref2"), 0, *BASE_ARGS)
    assert first.steps() == list(range(1, 33))
    assert first.final_hash() == second.final_hash()
    return first.final_hash()


def stop_mid_training(run_dir: Path, how: str, after: int = 6, pg_backend: str = "") -> Attempt:
    attempt = start(run_dir, 0, *BASE_ARGS, "--sleep-per-step", "0.15", pg_backend=pg_backend)
    attempt.wait_for_step(after)
    if how == "file":
        attempt.layout.stop_file(0, 0).touch()
    else:
        os.kill(attempt.worker_pid(1), signal.SIGUSR2)  # only rank 1 hears it: the others must agree anyway
    assert attempt.wait() == 0
    return attempt


def agreed_step(attempt: Attempt) -> int:
    stopped = [
        {int(m) for m in re.findall(r"^\[example\] rank \d stop agreed at step (\d+)$", attempt.log(r), re.M)}
        for r in (0, 1)
    ]
    assert stopped[0] == stopped[1]
    assert len(stopped[0]) == 1
    return stopped[0].pop()


@pytest.mark.parametrize("how", ["file", "signal"])
def test_stop_checkpoint_and_exact_resume(tmp_path: Path, reference_hash: str, how: str) -> None:
    first = stop_mid_training(tmp_path, how)
    step = agreed_step(first)
    marker = json.loads(first.layout.stopped_marker(0).read_text())
    assert marker["step"] == step
    assert marker["signal_time"] is not None
    ckpt = Path(marker["checkpoint"])
    assert ckpt.name == f"step-{step:09d}"
    assert (ckpt / "COMPLETE").exists()
    assert {"rank-0.pt", "rank-1.pt", "shared.pt"} <= {p.name for p in ckpt.iterdir()}
    assert [e["step"] for e in records(first.layout.root) if e["event"] == "stop"] == [step]
    assert first.steps() == list(range(1, step + 1))
    assert "final-weights-sha256" not in first.log(0)

    second = run(tmp_path, 1, *BASE_ARGS)
    assert f"resumed from step {step}" in second.log(0)
    assert second.steps() == list(range(step + 1, 33))  # together: every step exactly once
    assert second.final_hash() == reference_hash
    assert not second.layout.stopped_marker(1).exists()


def test_nccl_shaped_lane_stop_checkpoint_marker_and_exact_resume(tmp_path: Path, reference_hash: str) -> None:
    """The default group opened as `cuda:gloo` refuses CPU tensors exactly as NCCL does: the whole path (stop
    request on one rank, agreement, checkpoint, marker, exit 0, resume, heartbeat) must use only the control group."""
    first = stop_mid_training(tmp_path, "signal", pg_backend="cuda:gloo")
    for rank in (0, 1):
        assert "No backend type associated" not in first.log(rank)
    step = agreed_step(first)
    marker = json.loads(first.layout.stopped_marker(0).read_text())
    assert marker["step"] == step and (Path(marker["checkpoint"]) / "COMPLETE").exists()
    assert json.loads(first.layout.progress_file(0, 1).read_text())["step"] == step

    second = run(tmp_path, 1, *BASE_ARGS, pg_backend="cuda:gloo")
    assert f"resumed from step {step}" in second.log(0)
    assert second.steps() == list(range(step + 1, 33))
    assert second.final_hash() == reference_hash
    assert json.loads(second.layout.progress_file(1, 0).read_text())["phase"] == "done"


def test_damaged_checkpoints_are_skipped(tmp_path: Path, reference_hash: str) -> None:
    first = stop_mid_training(tmp_path, "file", after=10)
    step = agreed_step(first)
    ckpts = sorted(first.layout.default_checkpoints.iterdir())
    assert len(ckpts) >= 3, ckpts
    newest, older, oldest = ckpts[-1], ckpts[-2], ckpts[-3]
    assert newest.name == f"step-{step:09d}"
    shared = newest / "shared.pt"
    shared.write_bytes(shared.read_bytes()[:1000])  # truncated
    rank1 = older / "rank-1.pt"
    rank1.write_bytes(b"\xff" * rank1.stat().st_size)  # same size, garbage: only rank 1 notices

    second = run(tmp_path, 1, *BASE_ARGS)
    resumed = int(oldest.name.split("-")[1])
    assert f"resumed from step {resumed}" in second.log(0)
    assert second.log(0).count("WARNING: skipping checkpoint") == 2
    skipped = [e["step"] for e in records(first.layout.root) if e["event"] == "checkpoint_skipped"]
    assert skipped == [step, int(older.name.split("-")[1])]
    assert second.final_hash() == reference_hash


def test_crash_during_save_leaves_no_complete_checkpoint(tmp_path: Path, reference_hash: str) -> None:
    crashed = start(tmp_path, 0, *BASE_ARGS, "--crash-at-step", "8", "--crash-rank", "1", "--crash-in-save")
    assert crashed.wait() != 0
    assert "Traceback" in crashed.log(1)
    partial = crashed.layout.default_checkpoints / "step-000000008"
    assert partial.is_dir()
    assert not (partial / "COMPLETE").exists()
    assert not crashed.layout.stopped_marker(0).exists()

    second = run(tmp_path, 1, *BASE_ARGS)
    assert "resumed from step 4" in second.log(0)
    assert "no completion marker" in second.log(0)
    assert second.final_hash() == reference_hash


def test_crash_in_a_step_exits_non_zero(tmp_path: Path) -> None:
    crashed = start(tmp_path, 0, *BASE_ARGS, "--crash-at-step", "2", "--crash-rank", "0")
    assert crashed.wait() != 0
    assert "RuntimeError: injected crash at step 2 on rank 0" in crashed.log(0)
    assert crashed.log(1).startswith("[ddpctl.worker] rank=1 attempt=0")
