"""The code snapshot end to end on the local backend: a resumed attempt runs the code as it was at submit.

The example trainer is copied into a fresh git repository; after the first step the script is edited so that it
would print something else and train differently; the preempted and resumed run must still have run the original
code and end with the weights of an uninterrupted run of the original code.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, example_spec, final_hash, write_spec
from gittools import git

pytestmark = pytest.mark.torchrun

STEP_LINE = re.compile(r"\[example\] step (\d+)/")
EDITED = "EDITED-AFTER-SUBMIT"


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
    reference_id, reference_dir = cli.submit(example_spec(tmp_path, "reference", snapshot="off"))
    submitted = cli.run(
        "submit", str(example_spec(tmp_path, "pinned", "--sleep-per-step", "0.5", script=script, snapshot="auto"))
    ).stdout
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
        str(script) not in argv and f"{run_dir}/code/train.py" in argv for argv in launched
    )
    assert status["code"]["commit"] == commit and status["code"]["dirty"] is False
    assert status["code"]["branch"] == "exp"
    human = cli.run("status", job_id).stdout
    assert f"code: git {commit[:12]} on exp, clean" in human, human


APPENDER = """
from pathlib import Path
results = Path(__file__).parent / "results.csv"
print("SEEN " + repr(results.read_text()), flush=True)
with results.open("a") as out:
    out.write("row\\n")
"""


def test_each_run_sees_only_the_bytes_it_submitted(tmp_path: Path) -> None:
    """Two runs of one commit, each appending to a file beside its script: neither sees the other's row, and the
    traceback-facing path is the run's own (runs/<name>/<job id>/code/...)."""
    cli = Cli(tmp_path / "home")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(APPENDER)
    (code / "results.csv").write_text("header\n")
    git(code, "init", "-q", "-b", "main")
    git(code, "add", ".")
    git(code, "commit", "-qm", "appender")
    git(code, "update-index", "--add", "--cacheinfo", f"160000,{git(code, 'rev-parse', 'HEAD')},vendor/dep")
    git(code, "commit", "-qm", "a submodule")
    spec = write_spec(
        tmp_path / "append.yaml",
        name="append",
        script=str(code / "train.py"),
        run_dir=str(tmp_path / "runs"),
        backend="local",
        env={"OMP_NUM_THREADS": "1"},
    )
    for _ in range(2):
        out = cli.run("submit", str(spec)).stdout
        job_id = out.split("job ", 1)[1].split()[0]
        run_dir = Path(out.split("run dir:", 1)[1].split()[0])
        assert f"; runs {run_dir}/code/train.py" in out and run_dir.parent.name == "append", out
        assert "not snapshotted (git submodules): vendor/dep" in out, out
        assert cli.wait_terminal(job_id, timeout=180)["state"] == "COMPLETED"
        assert "SEEN 'header\\n'" in (run_dir / "attempt-0" / "rank-0.log").read_text()
    assert (code / "results.csv").read_text() == "header\n"
