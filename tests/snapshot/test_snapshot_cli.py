"""`ddpctl submit --dry-run` and the snapshot: the real CLI as a subprocess, real git, real files."""

from __future__ import annotations

import os
from pathlib import Path

from clitools import Cli, write_spec
from gittools import git


def make_repo(root: Path) -> Path:
    root.mkdir()
    (root / "train.py").write_text("print(1)\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{git(root, 'rev-parse', 'HEAD')},vendor/dep")
    git(root, "commit", "-qm", "submodule")
    return root


def test_dry_run_names_the_copy_each_attempt_runs_and_copies_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    runs = tmp_path / "runs"
    spec = write_spec(tmp_path / "job.yaml", name="dry", script=str(repo / "train.py"), run_dir=str(runs))
    out = Cli(tmp_path / "home").run("submit", str(spec), "--dry-run", "--backend", "local").stdout
    pinned = f"{runs}/dry/JOBID/code/train.py"
    assert f"(checked, not copied); each attempt runs {pinned}" in out, out
    assert "not snapshotted (git submodules): vendor/dep" in out, out
    torchrun = [line for line in out.splitlines() if "torchrun" in line or "train.py" in line]
    assert all(str(repo / "train.py") not in line for line in torchrun), out
    assert any(pinned in line for line in torchrun if "code: " not in line), out
    assert not runs.exists()  # nothing stored, nothing copied


def test_dry_run_fails_as_the_submit_would(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    os.close(os.open(os.fsencode(repo) + b"/caf\xe9.py", os.O_WRONLY | os.O_CREAT))
    spec = write_spec(tmp_path / "job.yaml", name="dry", script=str(repo / "train.py"), run_dir=str(tmp_path / "r"))
    done = Cli(tmp_path / "home").run("submit", str(spec), "--dry-run", "--backend", "local", check=False)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "the file name 'caf\\\\xe9.py' is not UTF-8" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_snapshot_exclude_is_validated_like_other_keys(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    cli = Cli(tmp_path / "home")
    for value, expected in (
        ("data/", "snapshot_exclude: got 'data/' (a string), expected a list of strings"),
        ([f"p{i}" for i in range(300)], "snapshot_exclude: got 300 patterns, expected at most 256"),
        (["!"], "snapshot_exclude.0: got '!', expected a glob such as data/ or *.csv, or !glob to keep a file"),
    ):
        spec = write_spec(
            tmp_path / "job.yaml", name="x", script=str(repo / "train.py"), snapshot_exclude=value, run_dir="r"
        )
        done = cli.run("submit", str(spec), "--dry-run", "--backend", "local", check=False)
        assert done.returncode != 0 and expected in done.stderr, done.stderr
