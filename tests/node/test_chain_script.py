"""The rendered batch script's chain paths, EXECUTED by bash with stub srun/scontrol/sbatch/scancel/squeue on
PATH (the real `python -m ddpctl internal ...` commands run): a failed `scontrol requeue` continues the run in a
chained job; a successor runs as the next attempt; a successor of a finished run does not train."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from stubtools import RECORDING_STUB, on_path, recorded_argv, write_command

from ddpctl.plan.render import RenderInputs, render_script
from ddpctl.spec import load_spec, resolve_paths, spec_to_mapping

ANSWERS = {"sbatch": "echo 99\n", "scontrol": 'echo "Requested operation is presently disabled" >&2; exit 1\n'}


def prepare(tmp_path: Path, mode: str, srun: str = "", python: str = sys.executable) -> Path:
    for name in ("srun", "scontrol", "scancel", "squeue", "sbatch"):
        write_command(tmp_path / "bin", name, RECORDING_STUB + {**ANSWERS, "srun": srun}.get(name, ""))
    (tmp_path / "train.py").write_text("")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        yaml.safe_dump({"name": "c", "script": "train.py", "run_dir": "runs", "requeue": {"mode": mode}})
    )
    spec = resolve_paths(load_spec(spec_file, check_paths=False), tmp_path)
    run_dir = tmp_path / "runs" / "c" / "4242"
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))
    script = render_script(spec, RenderInputs(run_base=run_dir.parent, python=python))
    (run_dir / "job.sbatch").write_text(script)
    return run_dir


def run(tmp_path: Path, run_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": on_path(tmp_path / "bin"),
        "STUB_OUT": str(tmp_path / "out"),
        "SLURM_JOB_ID": "4242",
        **extra,
    }
    env.pop("DDPCTL_CHAIN_ATTEMPT", None)
    return subprocess.run(
        ["bash", str(run_dir / "job.sbatch"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,  # its own process group: a stub may signal all of it (never this test runner)
    )


def argv(tmp_path: Path, name: str, n: int = 0) -> list[str]:
    return recorded_argv(tmp_path / "out", name, n)


def events(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def test_a_failed_scontrol_requeue_continues_the_run_in_a_chained_job(tmp_path: Path) -> None:
    run_dir = prepare(tmp_path, "requeue")
    (run_dir / "attempt-0").mkdir()
    (run_dir / "attempt-0" / "stopped.json").write_text('{"step": 3}')  # the ranks stopped for a requeue
    done = run(tmp_path, run_dir)
    assert done.returncode == 0, done.stderr
    assert argv(tmp_path, "scontrol") == ["requeue", "4242"]
    assert argv(tmp_path, "sbatch") == [
        "--parsable",
        "--dependency=afterany:4242",
        f"--output={run_dir}/slurm.out",
        "--open-mode=append",
        f"{run_dir}/job.sbatch",
        str(run_dir),
        "1",
    ]
    chained = [e for e in events(run_dir) if e["event"] == "chain-submit"]
    assert [(e["attempt"], e["job_id"], e["why"]) for e in chained] == [(0, "99", "scontrol requeue failed")]
    assert "the run continues in a chained job" in done.stderr


def test_a_successor_runs_as_the_next_attempt_of_the_run(tmp_path: Path) -> None:
    run_dir = prepare(tmp_path, "chain")
    assert "#SBATCH --no-requeue" in (run_dir / "job.sbatch").read_text()
    done = run(tmp_path, run_dir, str(run_dir), "3")  # as submitted by attempt 2's job
    assert done.returncode == 0, done.stderr
    env = dict(i.decode().split("=", 1) for i in (tmp_path / "out" / "srun" / "env.0").read_bytes().split(b"\0")[:-1])
    assert env["DDPCTL_CHAIN_ATTEMPT"] == "3" and argv(tmp_path, "srun")[-1] == str(run_dir)
    decided = [e for e in events(run_dir) if e["event"] == "decision"]
    assert [(e["attempt"], e["action"]) for e in decided] == [(3, "finish")]
    assert (run_dir / "finished").exists()  # what the next start's restart guard tests for
    assert not (tmp_path / "out" / "sbatch").exists() and not (tmp_path / "out" / "scontrol").exists()


def finished(run_dir: Path, exit_code: int) -> None:
    """As `internal decide` leaves a finished run: the marker, then the decision."""
    (run_dir / "finished").touch()
    decision = {"event": "decision", "attempt": 0, "action": "finish", "reason": "x", "exit_code": exit_code}
    (run_dir / "events.jsonl").write_text(json.dumps(decision) + "\n")


@pytest.mark.parametrize("status", [0, 1, 76])
def test_a_successor_of_a_finished_run_does_not_train_and_ends_as_the_run_did(tmp_path: Path, status: int) -> None:
    run_dir = prepare(tmp_path, "chain")
    finished(run_dir, status)
    done = run(tmp_path, run_dir, str(run_dir), "1")
    assert done.returncode == status and "the run already finished in attempt 0" in done.stderr, done.stderr
    assert not (tmp_path / "out" / "srun").exists()


@pytest.mark.parametrize("status", [0, 1])
def test_a_requeued_job_of_a_finished_run_does_not_train_and_ends_as_the_run_did(tmp_path: Path, status: int) -> None:
    """Slurm >= 24.05 requeues a job once more after its run already finished (tests/cluster/README.md): that
    start must not train, and must not turn a failed run's job into a COMPLETED one."""
    run_dir = prepare(tmp_path, "requeue")
    finished(run_dir, status)
    done = run(tmp_path, run_dir, SLURM_RESTART_COUNT="1")
    assert done.returncode == status and "the run already finished in attempt 0" in done.stderr, done.stderr
    assert not (tmp_path / "out" / "srun").exists()


PYTHON_LOGGED = """#!/bin/bash
mkdir -p "$STUB_OUT"
printf '%s\\n' "$*" >> "$STUB_OUT/python.log"
exec {python} "$@"
"""


@pytest.mark.parametrize(("mode", "args"), [("requeue", ()), ("chain", ("RUN_DIR", "1"))])
def test_a_requeued_or_chained_start_of_a_live_run_starts_no_interpreter_before_srun(
    tmp_path: Path, mode: str, args: tuple[str, ...]
) -> None:
    """Only a run that may have ended (its marker, or a cancel request) costs a start an `internal chain-check`:
    an interpreter start on every requeued start's way to its first step, ~0.1 s here, more on a shared FS."""
    wrapper = write_command(tmp_path, "python-logged", PYTHON_LOGGED.format(python=sys.executable))
    run_dir = prepare(tmp_path, mode, python=str(wrapper))
    requeue = {"kind": "preemption", "reason": "preemption: requeue 1 of 10", "exit_code": 0}
    decision = {"event": "decision", "attempt": 0, "action": "requeue", **requeue}
    (run_dir / "events.jsonl").write_text(json.dumps(decision) + "\n")
    argv_ = [str(run_dir) if a == "RUN_DIR" else a for a in args]
    done = run(tmp_path, run_dir, *argv_, SLURM_RESTART_COUNT="1")
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "out" / "python.log").read_text().splitlines()
    # `ddpctl internal decide ...` after srun is the first; no `internal chain-check` at all
    words = [c.split(" ddpctl internal ", 1)[1].split()[0] for c in calls]
    assert words[0] == "decide" and "chain-check" not in words, calls
    assert (tmp_path / "out" / "srun").exists()


# As node 0's launcher would (ddpctl.node.launch.record_attempt_start): record the start from the variables the
# batch shell exported to its step.
SRUN_RECORDS_THE_START = """python -m ddpctl internal batch-start "${@: -1}" --at "$DDPCTL_ATTEMPT_AT"
"""


@pytest.mark.parametrize("launcher_records", [True, False])
def test_the_attempt_start_is_dated_by_the_shell_and_recorded_once(tmp_path: Path, launcher_records: bool) -> None:
    """The batch shell starts no record of its own beside the nodes' start-up: it exports its start time and
    host to the step, node 0's launcher records the start, and `internal decide` does when no launcher did."""
    run_dir = prepare(tmp_path, "requeue", srun=SRUN_RECORDS_THE_START if launcher_records else "")
    before = time.time()
    run(tmp_path, run_dir, HOSTNAME="login1")  # exported by sbatch from the submitting shell: not this host
    starts = [e for e in events(run_dir) if e["event"] == "attempt-start"]
    assert len(starts) == 1, starts
    assert before <= float(str(starts[0]["t"])) <= before + 1.0 and starts[0]["batch_host"] == socket.gethostname()
    env = dict(i.decode().split("=", 1) for i in (tmp_path / "out" / "srun" / "env.0").read_bytes().split(b"\0")[:-1])
    assert abs(float(env["DDPCTL_ATTEMPT_AT"].replace(",", ".")) - float(str(starts[0]["t"]))) < 0.001
