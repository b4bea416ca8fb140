"""ddpctl.snapshot against real git repositories and directories in tmp_path (real git, real files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gittools import git

from ddpctl.errors import SpecError
from ddpctl.snapshot import SnapshotInfo, pin, read_info, summary, take
from ddpctl.snapshot.collect import Limits, parse_status
from ddpctl.spec import JobSpec


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "train.py").write_text("print('v1')\n")
    (root / "lib.py").write_text("X = 1\n")
    (root / ".gitignore").write_text("ignored.txt\nruns/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    return root


def take_at(spec: JobSpec, where: Path, limits: Limits | None = None) -> SnapshotInfo | None:
    """take() as submit calls it: the record and the run's copy of the code in one (staging) run dir."""
    where.mkdir(parents=True, exist_ok=True)
    return take(spec, where / "snapshot.json", where / "code", limits)


def spec_for(script: Path, run_dir: Path, mode: str = "auto") -> JobSpec:
    return JobSpec(name="t", script=str(script), run_dir=str(run_dir), snapshot=mode)


def tree_files(path: str) -> dict[str, str]:
    root = Path(path)
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("text", "expected"), [
    ("# branch.oid (initial)\0# branch.head main\0", (None, "main", set(), False)),
    ("# branch.oid abc\0# branch.head (detached)\0? new.py\0", ("abc", None, {"new.py"}, True)),
    # staged only (work tree = index: the index's blob is right) vs. changed in the work tree
    ("# branch.oid abc\0# branch.head b\0" "1 M. N... 100644 100644 100644 h1 h2 staged.py\0"
     "1 .M N... 100644 100644 100644 h1 h1 edited file.py\0", ("abc", "b", {"edited file.py"}, True)),
    # a rename carries its original path as the next token; a deletion in the work tree is a change
    ("2 R. N... 100644 100644 100644 h1 h1 R100 new.py\0old.py\0" "1 .D N... 100644 100644 000000 h1 h1 gone.py\0",
     (None, None, {"gone.py"}, True)),
])  # fmt: skip
def test_parse_status(text: str, expected: tuple[object, ...]) -> None:
    assert parse_status(text) == expected


def test_git_snapshot_holds_tracked_dirty_and_untracked_files_but_not_ignored_ones(repo: Path, tmp_path: Path) -> None:
    (repo / "lib.py").write_text("X = 2\n")  # uncommitted change
    (repo / "new.py").write_text("Y = 1\n")  # untracked, not ignored
    (repo / "ignored.txt").write_text("no\n")
    (repo / "runs").mkdir()
    (repo / "runs" / "big.bin").write_text("checkpoint")
    info = take_at(spec_for(repo / "jobs" / "train.py", repo / "runs"), tmp_path / "snapshot")
    assert info is not None and info.mode == "git"
    assert tree_files(info.path) == {
        ".gitignore": "ignored.txt\nruns/\n",
        "jobs/train.py": "print('v1')\n",
        "lib.py": "X = 2\n",
        "new.py": "Y = 1\n",
    }
    assert (info.commit, info.branch, info.dirty) == (git(repo, "rev-parse", "HEAD"), "main", True)
    assert info.script == str(Path(info.path) / "jobs" / "train.py")
    assert read_info(tmp_path / "snapshot" / "snapshot.json") == info
    assert info.path == str(tmp_path / "snapshot" / "code")
    assert "dirty" in summary(info) and info.commit is not None and info.commit[:12] in summary(info)


def test_unchanged_second_submit_copies_nothing_and_a_change_copies_only_itself(repo: Path, tmp_path: Path) -> None:
    spec = spec_for(repo / "jobs" / "train.py", tmp_path / "runs")
    first = take_at(spec, tmp_path / "a")
    second = take_at(spec, tmp_path / "b")
    assert first is not None and second is not None
    assert not first.dirty and first.new_bytes == first.bytes > 0
    assert (second.tree, second.new_bytes) == (first.tree, 0)
    (repo / "lib.py").write_text("X = 3\n")
    third = take_at(spec, tmp_path / "c")
    assert third is not None and third.tree != first.tree and third.new_bytes == len("X = 3\n")
    assert tree_files(first.path)["lib.py"] == "X = 1\n"  # the first run's code is untouched
    objects = [p for p in (tmp_path / "runs" / ".snapshots" / "v2" / "objects").rglob("*") if p.is_file()]
    assert len(objects) == 4  # 3 files + the one changed content, each stored once


def test_dir_mode_and_auto_outside_git(tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / "pkg" / "__pycache__").mkdir(parents=True)
    (code / "train.py").write_text("print(1)\n")
    (code / "pkg" / "m.py").write_text("M = 1\n")
    (code / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (code / ".venv").mkdir()
    (code / ".venv" / "big").write_bytes(b"\0")
    for mode in ("auto", "dir"):
        info = take_at(spec_for(code / "train.py", tmp_path / "runs", mode), tmp_path / f"{mode}")
        assert info is not None and (info.mode, info.commit, info.dirty) == ("dir", None, False)
        assert tree_files(info.path) == {"train.py": "print(1)\n", "pkg/m.py": "M = 1\n"}
        assert "directory" in summary(info)
    with pytest.raises(SpecError, match=r"snapshot: git, but the script .* is not in a git work tree"):
        take_at(spec_for(code / "train.py", tmp_path / "runs", "git"), tmp_path / "git")


def test_off_takes_nothing_and_pin_keeps_the_script(tmp_path: Path) -> None:
    spec = spec_for(tmp_path / "train.py", tmp_path / "runs", "off")
    assert take_at(spec, tmp_path / "snapshot") is None
    assert not (tmp_path / "snapshot" / "snapshot.json").exists() and not (tmp_path / "runs").exists()
    assert pin(spec, tmp_path / "snapshot" / "snapshot.json") == spec
    assert "not snapshotted" in summary(None)


def test_pin_runs_the_snapshot_and_refuses_a_missing_one(repo: Path, tmp_path: Path) -> None:
    spec = spec_for(repo / "jobs" / "train.py", tmp_path / "runs")
    info = take_at(spec, tmp_path / "snapshot")
    assert info is not None
    (repo / "jobs" / "train.py").write_text("print('v2')\n")
    pinned = pin(spec, tmp_path / "snapshot" / "snapshot.json")
    assert Path(pinned.script).read_text() == "print('v1')\n" and pinned.script != spec.script
    import shutil

    shutil.rmtree(tmp_path / "snapshot" / "code")
    with pytest.raises(SpecError, match=r"snapshot: .*train.py is missing"):
        pin(spec, tmp_path / "snapshot" / "snapshot.json")


def test_limits_give_one_clear_error_and_leave_nothing_behind(repo: Path, tmp_path: Path) -> None:
    spec = spec_for(repo / "jobs" / "train.py", tmp_path / "runs")
    with pytest.raises(SpecError) as err:
        take_at(spec, tmp_path / "snapshot", Limits(max_files=2))
    message = str(err.value)
    assert "\n" not in message and f"{repo} holds 3 files" in message and "allowed are 2 files" in message
    assert "snapshot: off" in message
    assert not (tmp_path / "snapshot" / "snapshot.json").exists()
    assert not list((tmp_path / "runs").rglob("*")) if (tmp_path / "runs").exists() else True
    (repo / "big.bin").write_bytes(b"x" * (2 * 1024 * 1024))
    with pytest.raises(
        SpecError, match=r"holds more than 1 MB of code to snapshot \(.*\); allowed are 50000 files / 1 MB"
    ):
        take_at(spec, tmp_path / "snapshot", Limits(max_bytes=1024 * 1024))
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("x")
    (code / "a").write_text("y")
    with pytest.raises(SpecError, match="holds more than 1 files"):
        take_at(spec_for(code / "train.py", tmp_path / "runs", "dir"), tmp_path / "d", Limits(max_files=1))


def test_the_size_limit_error_is_true_for_one_big_file(repo: Path, tmp_path: Path) -> None:
    """Issue 43 item 17: one 2 GB file was "more than 0 files / 2048.0 MB"; it names the file and its size."""
    spec = spec_for(repo / "jobs" / "train.py", tmp_path / "runs")
    with (repo / "huge.dat").open("wb") as f:
        f.truncate(2 << 30)  # sparse: 2 GB that cost no disk (nothing is read before the limit)
    with pytest.raises(SpecError) as err:
        take_at(spec, tmp_path / "snapshot")
    assert str(err.value).startswith(
        f"snapshot: {repo} holds more than 512 MB of code to snapshot (huge.dat alone is 2048.0 MB); "
        "allowed are 50000 files / 512 MB"
    ), err.value
    (repo / "huge.dat").unlink()
    (repo / "a.txt").write_text("x" * (600 << 10))
    (repo / "b.txt").write_text("y" * (600 << 10))  # after .gitignore and a.txt: the third file
    with pytest.raises(SpecError) as err:
        take_at(spec, tmp_path / "snapshot", Limits(max_bytes=1 << 20))
    assert f"{repo} holds more than 1 MB of code to snapshot (3 files make 1.2 MB); allowed" in str(err.value)


def test_an_ignored_script_is_refused(repo: Path, tmp_path: Path) -> None:
    (repo / "ignored.txt").write_text("print(1)\n")
    with pytest.raises(SpecError, match=r"is not part of the snapshot of .*ignored by git"):
        take_at(spec_for(repo / "ignored.txt", tmp_path / "runs"), tmp_path / "snapshot")


def test_limits_from_env() -> None:
    assert Limits.from_env({"DDPCTL_SNAPSHOT_MAX_MB": "2", "DDPCTL_SNAPSHOT_MAX_FILES": "7"}) == Limits(7, 2 << 20)
    with pytest.raises(SpecError, match="DDPCTL_SNAPSHOT_MAX_MB: got '2G', expected a whole number"):
        Limits.from_env({"DDPCTL_SNAPSHOT_MAX_MB": "2G"})


def test_record_is_json(repo: Path, tmp_path: Path) -> None:
    take_at(spec_for(repo / "jobs" / "train.py", tmp_path / "runs"), tmp_path / "snapshot")
    data = json.loads((tmp_path / "snapshot" / "snapshot.json").read_text())
    assert {"mode", "commit", "branch", "dirty", "tree", "path", "script"} <= set(data)
