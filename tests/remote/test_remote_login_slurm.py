"""The test cluster's login node over SSH (tests/sshdtools.py's `NetnsLogin`): sshd in network, UTS and PID
namespaces of its own on the cluster's bridge (10.99.0.2, hostname `login`), whose ddpctl submits with sbatch to the
real Slurm cluster. Every client command runs in a private mount namespace where the login's work directory and
ddpctl home are empty tmpfs mounts, so a client that read the run dir directly would fail: all it learns comes
through the cluster's ddpctl over the connection.

The job is the example trainer as in tests/integration/test_preemption.py (2 nodes x 2 ranks, 12 steps): submitted,
followed with `logs -f`, preempted, requeued by Slurm, resumed and ended with the weights of the uninterrupted run
(the session's `reference` fixture)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from clitools import EXAMPLE_SCRIPT, TERMINAL
from slurmtools import job_info
from sshdtools import NetnsLogin, ensure_sshd

pytestmark = [pytest.mark.slurm, pytest.mark.one_slurm_version]  # the login node runs the host's 22.05 clients

TRAIN = ["--epochs", "2", "--steps-per-epoch", "6"]  # test_preemption's TRAIN: the reference fixture's run
PACE = ["--ckpt-every", "4", "--sleep-per-step", "0.5"]  # time to preempt; changes no weights
PREFIX_RE = re.compile(r"^\[a(\d+) (\S+) r(\d+)\] ")
STEP_RE = re.compile(r"\] \[example\] step (\d+)/12 ")
START_TIMEOUT_S = 240  # the cluster is shared: the job may wait for other jobs first


@pytest.fixture
def login(tmp_path: Path) -> Iterator[NetnsLogin]:
    ensure_sshd()
    sockets = Path(tempfile.mkdtemp(prefix="ctl-"))  # pytest's tmp_path is too deep for socket names
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, sockets, ignore_errors=True)
        node = NetnsLogin(tmp_path, sockets, hidden=[tmp_path / "work", tmp_path / "remote-home"])
        cleanup.callback(node.stop)
        node.start()
        yield node


def project(login: NetnsLogin) -> Path:
    """The example trainer's files as a laptop's project, its spec beside them: sbatch on the debug partition,
    run dirs relative, so in the login's work directory."""
    code = login.home / "project"
    code.mkdir()
    for source in EXAMPLE_SCRIPT.parent.glob("*.py"):
        shutil.copy(source, code / source.name)
    spec = yaml.safe_load((EXAMPLE_SCRIPT.parents[1] / "example.yaml").read_text())
    spec.update(name="far", script="train.py", args=[*TRAIN, *PACE], run_dir="runs")
    (code / "job.yaml").write_text(json.dumps(spec))  # JSON is YAML
    profile = {"login": {"ssh": "login", "ddpctl": login.remote, "workdir": str(login.home / "work")}}
    (login.home / "clusters.yaml").write_text(json.dumps(profile))
    return code / "job.yaml"


class Follower:
    """`ddpctl logs -f --cluster login JOB --no-color` in the client's namespace, read on a thread."""

    def __init__(self, login: NetnsLogin, job: str) -> None:
        argv = login.argv("-f", "--no-color", "--cluster", "login", job, command="logs")
        self.proc = subprocess.Popen(argv, env=login.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.err = ""
        self.threads = [threading.Thread(target=self.out, daemon=True), threading.Thread(target=self.errs, daemon=True)]
        for thread in self.threads:
            thread.start()

    def out(self) -> None:
        assert self.proc.stdout is not None
        self.lines.extend(line.rstrip("\n") for line in self.proc.stdout)

    def errs(self) -> None:
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()

    def steps(self, attempt: int) -> list[int]:
        """The steps rank 0 of `attempt` logged, as the follower showed them."""
        return [
            int(s.group(1))
            for line in list(self.lines)
            if (p := PREFIX_RE.match(line)) and p.group(1) == str(attempt) and p.group(3) == "0"
            if (s := STEP_RE.search(line))
        ]

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout=timeout)
        for thread in self.threads:
            thread.join(timeout=10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(predicate: Callable[[], object], what: str, timeout: float, poll_s: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(poll_s)


def remote_status(login: NetnsLogin, job: str) -> dict[str, Any]:
    done = login.cli("--cluster", "login", "--json", job, command="status")
    assert done.returncode == 0, done
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def test_submit_follow_preempt_and_exact_resume_through_the_login_node(
    login: NetnsLogin, cleanup_jobs: Callable[[str], str], reference: Any
) -> None:
    spec = project(login)
    submitted = login.cli(str(spec), "--cluster", "login", command="submit")
    assert submitted.returncode == 0, f"{submitted}\n{login.log()}"
    job = cleanup_jobs(submitted.stdout.split(": job ", 1)[1].split()[0])
    assert job.isdigit(), submitted.stdout  # a Slurm job id: sbatch ran on the login node
    run_dir = login.home / "work" / "runs" / "far" / job
    wait_for(run_dir.is_dir, "the run dir on the login node", 30)
    # The client's view: the login's directories are there, and empty.
    for hidden in login.hidden:
        view = subprocess.run(
            [*login.client_prefix, "ls", "-A", str(hidden)], capture_output=True, text=True, timeout=30, check=False
        )
        assert (view.returncode, view.stdout) == (0, ""), view
        assert any(hidden.iterdir())

    follower = Follower(login, job)
    try:
        wait_for(lambda: max(follower.steps(0), default=0) >= 3, "step 3 in logs -f", START_TIMEOUT_S)
        preempted = login.cli("--cluster", "login", job, command="preempt")
        assert preempted.returncode == 0, preempted
        status: dict[str, Any] = {}

        def ended() -> bool:
            status.update(remote_status(login, job))
            return status["state"] in TERMINAL

        wait_for(ended, "the job's end", 300, poll_s=1.0)  # a status costs CPU the job's ranks need on 2 cores
        code = follower.finish()
    finally:
        follower.kill()

    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), status
    assert job_info(job).get("Restarts") == "1", job_info(job)
    first, second = follower.steps(0), follower.steps(1)
    stop = first[-1]
    assert first == list(range(1, stop + 1)) and second == list(range(stop + 1, 13)), (first, second)
    text = "\n".join(follower.lines)
    seen = {(int(m.group(1)), int(m.group(3))) for line in follower.lines if (m := PREFIX_RE.match(line))}
    assert {(a, r) for a in (0, 1) for r in range(4)} <= seen, (sorted(seen), follower.err)
    assert f"resumed from step {stop}" in text and f"final-weights-sha256={reference.hash}" in text, text[-3000:]
    # The cluster's banners come on stderr (it runs `logs --json` there, whose banners go to stderr).
    banners = [line for line in follower.err.splitlines() if line.startswith("-- ")]
    assert "-- attempt 1 --" in banners and banners[-1] == f"-- job {job} COMPLETED --", follower.err
    assert code == 0 and follower.lines[-1].endswith(f"final-weights-sha256={reference.hash}"), follower.lines[-5:]
    shown = login.cli("--cluster", "login", job, command="status")
    assert shown.returncode == 0 and shown.stdout.startswith(f"{job}  far  COMPLETED (training completed) restart 1\n")
    assert f"attempt 0: preemption stop acknowledged: all ranks stopped at step {stop}," in shown.stdout, shown
    assert f"attempt 1: resumed from step {stop}\n" in shown.stdout, shown
    named = login.cli("far", command="status")  # by name, no --cluster: the laptop's registry says where
    assert named.returncode == 0 and named.stdout.splitlines()[0] == shown.stdout.splitlines()[0], named
