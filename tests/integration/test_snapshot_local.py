"""The code snapshot end to end on the local backend: a resumed attempt runs the code as it was at submit.

The example trainer is copied into a fresh git repository; after the first step the script is edited so that it
would print something else and train differently; the preempted and resumed run must still have run the original
code and end with the weights of an uninterrupted run of the original code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, final_hash, write_spec

pytestmark = pytest.mark.torchrun

ARGS = ["--epochs", "2", "--samples", "1024", "--ckpt-every", "2"]
STEP_LINE = re.compile(r"\[example\] step (\d+)/")
EDITED = "EDITED-AFTER-SUBMIT"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return done.stdout.strip()


def spec(tmp_path: Path, name: str, script: Path, *extra: str, snapshot: str = "auto") -> Path:
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        script=str(script),
        args=[*ARGS, *extra],
        nodes=2,
        nproc_per_node=2,
        run_dir=str(tmp_path / "runs"),
        env={"OMP_NUM_THREADS": "1"},
        backend="local",
        snapshot=snapshot,
    )


def steps_logged(log: Path) -> list[int]:
    return [int(m.group(1)) for m in STEP_LINE.finditer(log.read_text())] if log.exists() else []


def test_resumed_attempt_runs_the_submitted_code(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    code = tmp_path / "code"
    shutil.copytree(REPO / "jobs" / "example", code, ignore=shutil.ignore_patterns("__pycache__"))
    git(code, "init", "-q", "-b", "exp")
    git(code, "add", ".")
    git(code, "commit", "-qm", "example")
    commit = git(code, "rev-parse", "HEAD")
    script = code / "train.py"
    reference_id, reference_dir = cli.submit(
        spec(tmp_path, "reference", REPO / "jobs/example/train.py", snapshot="off")
    )
    submitted = cli.run("submit", str(spec(tmp_path, "pinned", script, "--sleep-per-step", "0.5"))).stdout
    assert f"code: git {commit[:12]} on exp, clean; snapshot " in submitted, submitted
    assert "requeue:  requeue (local backend: its supervisor starts every attempt itself" in submitted, submitted
    job_id = submitted.split("job ", 1)[1].split()[0]
    run_dir = Path(submitted.split("run dir:", 1)[1].split()[0])
    rank0 = run_dir / "attempt-0" / "rank-0.log"
    cli.wait_for(lambda: len(steps_logged(rank0)) >= 1, timeout=180, what="the first training step")

    # Would print something else and train differently (another learning rate) if it ran.
    original = script.read_text()
    script.write_text(f"print({EDITED!r}, flush=True)\n" + original.replace("default=0.05", "default=0.5"))
    git(code, "checkout", "-q", "-b", "elsewhere")  # and the user moved on to another branch
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=300)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), events(run_dir)
    assert cli.wait_terminal(reference_id, timeout=300)["state"] == "COMPLETED"

    resumed = (run_dir / "attempt-1" / "rank-0.log").read_text()
    assert "resumed from step" in resumed and EDITED not in resumed
    assert not any(EDITED in p.read_text() for p in run_dir.glob("attempt-*/rank-*.log"))
    assert final_hash(run_dir) is not None and final_hash(run_dir) == final_hash(reference_dir)
    launched = [e["argv"] for e in events(run_dir) if e["event"] == "launch"]
    assert len(launched) == 4 and all(
        str(script) not in argv and "/.snapshots/trees/" in " ".join(argv) for argv in launched
    )
    assert status["code"]["commit"] == commit and status["code"]["dirty"] is False
    assert status["code"]["branch"] == "exp"
    human = cli.run("status", job_id).stdout
    assert f"code: git {commit[:12]} on exp, clean" in human, human
