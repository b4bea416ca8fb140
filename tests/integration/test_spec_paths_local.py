"""Issue 31 item 5 on the real local backend: `ddpctl submit /abs/path/spec.yaml` from another directory runs the
script the spec names beside itself, puts run dirs beside the spec, takes `--set` paths from the current
directory, and says where at submit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import Cli

pytestmark = pytest.mark.torchrun

SCRIPT = """
import json, os
print("PATHS " + json.dumps({"cwd": os.getcwd(), "file": os.path.abspath(__file__),
      "ckpt": os.environ["DDPCTL_CKPT_DIR"], "run_dir": os.environ["DDPCTL_RUN_DIR"]}), flush=True)
"""


def test_a_spec_submitted_from_another_directory_means_what_it_says(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "jobs").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "train.py").write_text(SCRIPT)
    (elsewhere / "train.py").write_text("raise SystemExit('the wrong train.py: the current directory')\n")
    spec = project / "jobs" / "plain.yaml"
    spec.write_text("name: plain\nscript: ../train.py\nbackend: local\nsnapshot: off\n")  # no run_dir: the default

    cli = Cli(tmp_path / "home", cwd=elsewhere)
    done = cli.run("submit", str(spec), "--set", "checkpoint.dir=ckpt", "--wait")
    runs = project / "jobs" / "runs" / "plain"
    run_dir = Path(done.stdout.split("run dir:", 1)[1].split()[0])
    assert f"script:   {project / 'train.py'}\n" in done.stdout, done.stdout
    assert run_dir.parent == runs, done.stdout
    assert not (elsewhere / "runs").exists()

    log = (run_dir / "attempt-0" / "rank-0.log").read_text()
    seen = json.loads(log.split("PATHS ", 1)[1].splitlines()[0])
    assert seen == {
        "cwd": str(elsewhere),  # the job runs where it was submitted from: args keep their meaning
        "file": str(project / "train.py"),
        "ckpt": str(elsewhere / "ckpt"),  # a --set path starts at the current directory
        "run_dir": str(run_dir),
    }


def test_a_missing_script_is_one_line_naming_the_key_the_value_and_the_path(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "train.py").write_text("")  # in the current directory, not beside the spec
    spec = tmp_path / "jobs" / "plain.yaml"
    spec.write_text("name: plain\nscript: train.py\nbackend: local\n")
    done = Cli(tmp_path / "home", cwd=tmp_path).run("submit", str(spec), check=False)
    assert done.returncode == 2
    looked_for = tmp_path / "jobs" / "train.py"
    expected = f"{spec}:2: script: got 'train.py', expected an existing file (looked for {looked_for})"
    assert done.stderr == f"ddpctl: error: {expected}\n"
    assert not (tmp_path / "jobs" / "runs").exists() and not (tmp_path / "runs").exists()
