"""A Slurm controller that stops answering, on the real local cluster: slurmctld is SIGSTOPped (it keeps its socket,
takes requests into its backlog and answers nothing, as a controller stalled on its state save does) and continued.

* a submit during the outage: sbatch says "Socket timed out", the controller creates the job once it continues;
  submit finds the job by its tag and adopts it, or, when the controller stays silent past the bound, withdraws the
  submission, and the job created later exits at its start without training;
* a running job during the outage: `status` answers within the query bound, says the controller is not answering
  and what the run dir knows (not UNKNOWN); `logs -f` goes on printing the lines the ranks write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clitools import REPO, Cli, events
from slurmtools import STATE_DIR, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.cluster_alone]  # the controller stops for every test

SPEC = REPO / "jobs" / "example.yaml"
TRAIN = ["--epochs", "2", "--steps-per-epoch", "15", "--ckpt-every", "5", "--sleep-per-step", "1"]


def ctld_pid() -> int:
    return int((STATE_DIR / "run" / "slurmctld.pid").read_text().strip())


@pytest.fixture
def controller() -> Iterator[Callable[[bool], None]]:
    """`controller(False)` stops slurmctld, `controller(True)` continues it; always continued at the end."""
    pid = ctld_pid()

    def set_running(running: bool) -> None:
        os.kill(pid, signal.SIGCONT if running else signal.SIGSTOP)

    try:
        yield set_running
    finally:
        os.kill(pid, signal.SIGCONT)


def submit_args(runs: Path, name: str) -> list[str]:
    return [
        "submit",
        str(SPEC),
        "--set",
        f"run_dir={runs}",
        "--set",
        f"name={name}",
        "--set",
        f"args={json.dumps(TRAIN)}",
    ]


def test_submit_and_status_and_logs_while_the_controller_is_silent(
    tmp_path: Path, cleanup_jobs: Callable[[str], str], controller: Callable[[bool], None]
) -> None:
    cli = Cli(tmp_path / "home", extra_env={"DDPCTL_SUBMIT_RESOLVE_S": "90", "DDPCTL_SLURM_QUERY_S": "5"})
    controller(False)
    submit = subprocess.Popen(
        [sys.executable, "-m", "ddpctl", *submit_args(tmp_path / "runs", "outage")],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Continued once sbatch itself has given up (Slurm's MessageTimeout, 10 s): the job is created afterwards.
    cli.wait_for(lambda: sbatch_child(submit.pid), timeout=90, what="submit's sbatch")
    time.sleep(13)
    controller(True)
    out, err = submit.communicate(timeout=120)
    assert submit.returncode == 0, err
    assert "Socket timed out" in err and "but the controller had created job" in err, err
    job_id = cleanup_jobs(out.split("job ", 1)[1].split()[0])
    run_dir = tmp_path / "runs" / "outage" / job_id
    wait_for_state(job_id, {"RUNNING"}, timeout=60)
    cli.wait_for(lambda: "step 3/" in read(run_dir / "attempt-0" / "rank-0.log"), timeout=90, what="step 3")

    follower = subprocess.Popen(
        [sys.executable, "-m", "ddpctl", "logs", job_id, "-f", "--rank", "0"],
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), line) for line in follower.stdout or ()))
    reader.start()
    try:
        time.sleep(3)
        controller(False)
        stopped_at = time.monotonic()
        asked = time.monotonic()
        status = cli.run("status", job_id, check=False, timeout=60)
        took = time.monotonic() - asked
        print(f"status during the outage answered in {took:.1f} s")
        assert status.returncode == 0, status.stderr
        assert took < 5 + 10, f"status blocked {took:.1f} s"  # the 5 s bound, once, and a loaded start-up
        text = status.stdout
        assert "UNREACHABLE" in text and "Slurm controller not answering since" in text, text
        assert "from the run dir: attempt 0 started, no end recorded" in text and "UNKNOWN" not in text, text
        time.sleep(12)
        during = [line for t, line in lines if stopped_at + 2 < t <= time.monotonic()]
        controller(True)
        # ~1 step a second: the follower printed the steps written while nobody answered its state query.
        assert sum("step " in line for line in during) >= 6, during
    finally:
        controller(True)
        final = cli.wait_terminal(job_id, timeout=180)
        follower.wait(timeout=60)
        reader.join(timeout=10)
    assert final["state"] == "COMPLETED", events(run_dir)
    assert lines and lines[-1][1].strip() == f"-- job {job_id} COMPLETED --", lines[-3:]


def test_a_submit_the_controller_never_answered_is_withdrawn_and_its_job_never_trains(
    tmp_path: Path, cleanup_jobs: Callable[[str], str], controller: Callable[[bool], None]
) -> None:
    cli = Cli(tmp_path / "home", extra_env={"DDPCTL_SUBMIT_RESOLVE_S": "2", "DDPCTL_SLURM_QUERY_S": "3"})
    runs, name = tmp_path / "runs", f"withdrawn-{uuid.uuid4().hex[:8]}"  # a name no earlier job of the cluster has
    controller(False)
    try:
        done = cli.run(*submit_args(runs, name), check=False, timeout=120)
    finally:
        controller(True)
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "the submission is withdrawn, and a job it may yet create exits at its start without training" in done.stderr
    assert name not in cli.run("list").stdout
    # The controller continues and creates the job from the request it held: that job must not train.
    found: list[str] = []

    def created() -> bool:
        # -t all: a job that exits at its start leaves the queue within a second (the controller keeps it for
        # MinJobAge, 600 s here, and squeue lists it with all states).
        out = subprocess.run(
            ["squeue", "-h", "--me", "-t", "all", "-n", name, "-o", "%i"], capture_output=True, text=True, check=False
        )
        found.extend(out.stdout.split())
        return bool(found)

    cli.wait_for(created, timeout=30, what="the job the stalled controller created")
    job_id = cleanup_jobs(found[0])
    wait_for_state(job_id, {"FAILED", "COMPLETED"}, timeout=60)
    output = read(runs / name / f".slurm-{job_id}.out")
    assert f"ddpctl: job {job_id} was withdrawn by its submit, which reported failure: not training" in output
    assert not (runs / name / job_id).exists()
    assert sorted(p.name for p in (runs / name).iterdir()) == [f".slurm-{job_id}.out"]


def sbatch_child(parent: int) -> bool:
    """Whether `parent` has an sbatch child now (read from /proc: the test's own process tree)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            name = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except (OSError, IndexError):
            continue
        if name == "sbatch" and int(fields[1]) == parent:
            return True
    return False


def read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
