"""ddpctl's own interpreters never import from the working directory, and keep PYTHONPATH (issue 45, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ddpctl
from ddpctl.pyargv import python_module

REAL = str(Path(ddpctl.__file__).parent)


def same_interpreter_other_spelling() -> str:
    """This interpreter under another path string: python_module cannot know its version, so takes `-c`."""
    return str(Path(sys.executable).parent / "." / Path(sys.executable).name)


@pytest.mark.parametrize("python", [sys.executable, same_interpreter_other_spelling()])
def test_a_clone_named_ddpctl_in_the_working_directory_is_not_imported(tmp_path: Path, python: str) -> None:
    (tmp_path / "ddpctl").mkdir()  # the clone's top level: a namespace package if the cwd were on sys.path
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mymod.py").write_text("VALUE = 7\n")
    argv = [*python_module(python, "ddpctl"), "--version"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "lib")}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, ""), argv
    assert done.stdout.startswith("ddpctl ")
    probe = "import ddpctl, mymod, sys; print(ddpctl.__file__, mymod.VALUE, '' in sys.path)"
    (tmp_path / "lib" / "probe.py").write_text(probe)
    done = subprocess.run(
        [*python_module(python, "probe")], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.stdout.split() == [str(Path(REAL) / "__init__.py"), "7", "False"], done.stderr


def test_which_form() -> None:
    assert python_module("/opt/py/bin/python3", "m")[:2] == ["/opt/py/bin/python3", "-c"]
    if sys.version_info >= (3, 11):
        assert python_module(sys.executable, "m") == [sys.executable, "-P", "-m", "m"]
