"""Scripts that do not use ddpctl.runtime, on the real local Slurm cluster: the truth about their stops.

The script is jobs/own_checkpoint/train.py, written the way the torch tutorials teach (rank-0 torch.save of
checkpoint.pt plus dist.barrier, resume from that file). Both tests preempt it for real, with a job on the
`urgent` partition (GraceTime=10 on `debug`, then Slurm kills and requeues it):

- plain (no signal handling, no periodic save): nothing acknowledges the stop, the job is killed and restarts
  from step 1; ddpctl says exactly that (events, status, logs --errors) instead of a quiet "COMPLETED restart 1";
- own checkpointing with `requeue.script_signal: USR1`: the worker hands the script SIGUSR1, the script saves at
  an agreed step and exits 0, the job requeues and resumes from that file: no step is computed twice.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clitools import REPO, Cli, events
from nodefault import job_pids
from slurmtools import cluster_dump, sbatch_text

pytestmark = pytest.mark.slurm

SPEC = REPO / "jobs" / "own-checkpoint.yaml"
STEP_RE = re.compile(r"^step (\d+)/(\d+) ")
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "BUDGET_SPENT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home")


def steps(run_dir: Path, attempt: int) -> list[int]:
    try:
        text = (run_dir / f"attempt-{attempt}" / "rank-0.log").read_text(errors="replace")
    except OSError:
        return []
    return [int(m.group(1)) for line in text.splitlines() if (m := STEP_RE.match(line))]


def dump(run_dir: Path, job_id: str) -> str:
    parts = [json.dumps({k: v for k, v in e.items() if k not in ("argv", "dist")}) for e in events(run_dir)]
    for log in sorted(run_dir.glob("attempt-*/rank-0.log")):
        parts.append(f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-12:]))
    slurm_out = run_dir / "slurm.out"
    parts.append("--- slurm.out\n" + (slurm_out.read_text(errors="replace")[-3000:] if slurm_out.exists() else ""))
    return "\n".join(parts) + "\n" + cluster_dump(job_id)


def preempt_for_real(
    cli: Cli, tmp_path: Path, cleanup: Callable[[str], str], args: list[str], *sets: str, pair: str = ""
) -> tuple[str, Path, dict[str, Any]]:
    """`pair`: "" for the first pair's partitions (debug, urgent), "2" for the second pair's."""
    options = ["--set", f"run_dir={tmp_path / 'runs'}", "--set", f"args={json.dumps(args)}"]
    options += ["--set", f"partition=debug{pair}"]
    for item in sets:
        options += ["--set", item]
    job_id, run_dir = cli.submit(SPEC, *options)
    cleanup(job_id)
    cli.wait_for(lambda: len(steps(run_dir, 0)) >= 12, timeout=240, what=f"attempt 0 of job {job_id} at step 12")
    cleanup(sbatch_text("sleep 1", "-p", f"urgent{pair}", "-N2", "-J", "ddpctl-test-urgent"))
    cli.wait_for(lambda: steps(run_dir, 1), timeout=180, what=f"attempt 1 of job {job_id} training")
    status = cli.wait_terminal(job_id, timeout=300)
    return job_id, run_dir, status


# On the second pair: the grace period and the restart from scratch are waiting, beside the first pair's lane.
# One version in CI (114 s on 24.11): a real preemption by the urgent partition and its grace time run on 24.11 in
# test_preemption.py::test_a_run_failing_after_a_real_preemption_ends_failed_in_slurm_too.
@pytest.mark.second_pair
@pytest.mark.one_slurm_version
def test_plain_script_preempted_for_real_is_reported_unacknowledged_and_restarted_from_scratch(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    # Long enough to be killed at the end of debug2's grace time (30 s) rather than finish inside it: the stop
    # comes at step 12, 188 steps (56 s) before the end.
    args = ["--steps", "200", "--save-every", "0", "--sleep", "0.3"]
    sets = ("requeue.script_signal=null",)
    job_id, run_dir, status = preempt_for_real(cli, tmp_path, cleanup_jobs, args, *sets, pair="2")
    info = dump(run_dir, job_id)
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, f"{status}\n{info}"
    assert steps(run_dir, 1)[0] == 1, info  # it really restarted from scratch
    unacked = [e for e in events(run_dir) if e["event"] == "stop-unacknowledged"]
    assert [(e["attempt"], e["listeners"], e.get("killed")) for e in unacked] == [(0, [], True)], info
    assert not (run_dir / "attempt-0" / "stopped.json").exists(), info
    assert [(s["attempt"], s["state"]) for s in status["stops"]] == [(0, "unacknowledged")], status
    assert "no rank listens for stops" in status["stops"][0]["text"], status
    assert status["restart_notes"] == [
        "attempt 1: no checkpoint in checkpoint.dir (DDPCTL_CKPT_DIR); the script's own resume is unknown"
    ]
    human = cli.run("status", job_id).stdout
    assert "NOT ACKNOWLEDGED" in human and "work since its own last checkpoint is lost" in human, human
    assert "the script's own resume is unknown" in human, human
    errors = cli.run("logs", job_id, "--errors", "--attempt", "all")
    assert "attempt 0: preemption stop NOT ACKNOWLEDGED" in errors.stdout + errors.stderr, errors


# The hand-over to the script is the launchers' own (no Slurm call differs); CI runs it on 22.05 only. It passed
# on 24.11.5 in every CI run up to 2026-11-26; the real preemption above still runs on both versions.
@pytest.mark.one_slurm_version
def test_own_checkpoint_script_gets_its_signal_and_loses_nothing(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    args = ["--steps", "40", "--save-every", "10", "--sleep", "0.3", "--handle-signal"]
    job_id, run_dir, status = preempt_for_real(cli, tmp_path, cleanup_jobs, args)
    info = dump(run_dir, job_id)
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, f"{status}\n{info}"
    stopped = json.loads((run_dir / "attempt-0" / "stopped.json").read_text())
    assert stopped["source"] == "script" and stopped["checkpoint"].endswith("/checkpoint.pt"), stopped
    first, second = steps(run_dir, 0), steps(run_dir, 1)
    # The stop step is the last one attempt 0 computed; attempt 1 starts right after it: nothing lost, nothing
    # computed twice, all 40 steps exactly once.
    assert second[0] == first[-1] + 1 and first + second == list(range(1, 41)), info
    log0 = (run_dir / "attempt-0" / "rank-0.log").read_text()
    assert f"stopping at step {first[-1]} for requeue" in log0, info
    # Some rank's worker sent the signal; not necessarily rank 0's: the script agrees on the stop across ranks,
    # so rank 0 may save and leave before its own forwarder gets to it (scriptstop.peer_handler_got_it).
    rank_logs = [path.read_text() for path in sorted((run_dir / "attempt-0").glob("rank-*.log"))]
    assert any("sending SIGUSR1 to the script (its own handler)" in log for log in rank_logs), info
    decisions = [(e["action"], e["kind"]) for e in events(run_dir) if e["event"] == "decision"]
    assert decisions == [("requeue", "preemption"), ("finish", None)], info
    assert [(s["attempt"], s["state"]) for s in status["stops"]] == [(0, "acknowledged")], status
    assert "(nothing lost)" in status["stops"][0]["text"], status
    assert status["restart_notes"] == [
        f"attempt 1: restarted; the script's own checkpoint {stopped['checkpoint']} was there to resume from"
    ]
    assert not [e for e in events(run_dir) if e["event"] == "stop-unacknowledged"], info


# The hand-over to the script is the launchers' own (no Slurm call differs); CI runs it on 22.05 only. It passed
# on 24.11.5 in every CI run up to 2026-11-26; the real preemption above still runs on both versions.
@pytest.mark.one_slurm_version
def test_a_stop_as_the_job_starts_is_acknowledged_and_loses_nothing(
    cli: Cli, tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    # The warning signal to the batch shell the moment the job runs: before its handler was set it ended the
    # shell, and once srun ran it found launchers still starting (exit 140, blamed on the script, "NOT
    # ACKNOWLEDGED"). Now the shell keeps it, and the fan-out waits for the launchers to arm.
    options = ["--set", f"run_dir={tmp_path / 'runs'}"]
    job_id, run_dir = cli.submit(SPEC, *options)
    cleanup_jobs(job_id)
    cli.wait_for(lambda: squeue_state(job_id) == "RUNNING", timeout=120, what=f"job {job_id} running")
    # Once bash has run the script's first line (its trap): a signal before that ends any batch script, ours
    # included (a CI rehearsal under load sent it 50 ms after the launch: "task 0 died by signal: 12").
    cli.wait_for(lambda: batch_shell_catches(job_id, signal.SIGUSR2), timeout=60, what="the batch shell's trap")
    subprocess.run(["scancel", "--batch", "--signal=USR2", job_id], check=True, timeout=30)
    status = cli.wait_terminal(job_id, timeout=300)
    info = dump(run_dir, job_id)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), f"{status}\n{info}"
    decisions = [(e["action"], e["kind"], e.get("cause")) for e in events(run_dir) if e["event"] == "decision"]
    assert decisions == [("requeue", "preemption", "stop"), ("finish", None, None)], info
    assert [(s["attempt"], s["state"]) for s in status["stops"]] == [(0, "acknowledged")], status
    assert "(nothing lost)" in status["stops"][0]["text"], status


def batch_shell_catches(job_id: str, sig: signal.Signals) -> bool:
    """The job's batch script (on its batch host, found by the job's cgroup) has a handler for `sig` (SigCgt)."""
    host = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%B"], capture_output=True, text=True, check=False)
    for pid in job_pids(host.stdout.strip(), job_id):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
        if b"slurm_script" in cmdline and int(caught, 16) & (1 << (sig - 1)):
            return True
    return False


def squeue_state(job_id: str) -> str:
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=30, check=False
    )
    return done.stdout.strip()
