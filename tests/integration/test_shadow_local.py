"""Submitting from the folder that holds the checkout (issue 45, item 1).

With `pip install -e .` the clone is a folder named `ddpctl/` beside the user's specs. An interpreter that puts
its working directory first on sys.path (`python -m ...`) imports that folder as a namespace package instead of
the installed ddpctl. The CLI here is started as its console script is (no working directory on sys.path); every
interpreter ddpctl starts from it (supervisor, launcher, torchrun's agent, the workers' wrapper) must be too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clitools import Cli, write_spec

pytestmark = pytest.mark.torchrun

# What the `ddpctl` console script does: sys.path[0] is its bin directory, never the working directory.
CONSOLE = "import sys; del sys.path[0]; from ddpctl.cli import main; sys.exit(main())"


class ConsoleCli(Cli):
    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-c", CONSOLE, *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"ddpctl {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done


def test_a_job_submitted_beside_a_clone_named_ddpctl_runs(tmp_path: Path) -> None:
    here = tmp_path / "home-dir"
    clone = here / "ddpctl"  # the clone's top level: no __init__.py, so `import ddpctl` finds a namespace
    (clone / "jobs").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\nname = 'ddpctl'\n")
    (here / "lib").mkdir()
    (here / "lib" / "mymod.py").write_text("VALUE = 42\n")  # the user's own module, found through PYTHONPATH
    (here / "train.py").write_text("import mymod\nprint('value', mymod.VALUE, flush=True)\n")
    spec = write_spec(
        here / "job.yaml",
        name="beside",
        script="train.py",
        nodes=1,
        nproc_per_node=1,
        run_dir=str(tmp_path / "runs"),
        backend="local",
        env={"OMP_NUM_THREADS": "1"},
    )
    cli = ConsoleCli(tmp_path / "state", cwd=here, extra_env={"PYTHONPATH": str(here / "lib")})
    job_id, run_dir = cli.submit(spec)
    status = cli.wait_terminal(job_id, timeout=180)
    assert status["state"] == "COMPLETED", (status, (run_dir / "slurm.out").read_text())
    assert "value 42" in (run_dir / "attempt-0" / "rank-0.log").read_text()


def test_a_launcher_that_cannot_start_torchrun_says_why_in_status(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("print('never')\n")
    spec = write_spec(
        tmp_path / "job.yaml",
        name="nopython",
        script="t.py",
        nodes=1,
        nproc_per_node=1,
        run_dir=str(tmp_path / "runs"),
        backend="local",
        python="/nonexistent/python3",
    )
    cli = Cli(tmp_path / "state", cwd=tmp_path)
    job_id, _ = cli.submit(spec)
    status = cli.wait_terminal(job_id, timeout=120)
    assert status["state"] == "FAILED"
    shown = cli.run("status", job_id).stdout
    assert "/nonexistent/python3: No such file or directory" in shown, shown
