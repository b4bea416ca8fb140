"""The snapshot's guarantees (README "Code snapshot"), each against real git, real files and real processes:
isolation and exactness, privacy, completeness, bounds and errors, truthful reporting."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gittools import git

from ddpctl.errors import SpecError
from ddpctl.snapshot import SnapshotInfo, check, left_out_lines, take
from ddpctl.snapshot.collect import Limits, whole_number
from ddpctl.snapshot.copy import resolve
from ddpctl.snapshot.store import object_path, open_store
from ddpctl.spec import JobSpec

NOBODY = 65534  # another user's files: chown needs root (containers and CI run these as root)
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")


def commit_all(repo: Path) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "train.py").write_text("print('v1')\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root)
    return root


def spec_for(script: Path, run_dir: Path, mode: str = "auto", exclude: tuple[str, ...] = ()) -> JobSpec:
    return JobSpec(name="t", script=str(script), run_dir=str(run_dir), snapshot=mode, snapshot_exclude=exclude)


def take_at(spec: JobSpec, where: Path, limits: Limits | None = None) -> SnapshotInfo:
    where.mkdir(parents=True, exist_ok=True)
    info = take(spec, where / "snapshot.json", where / "code", limits)
    assert info is not None
    return info


def files_in(path: str | Path) -> dict[str, str]:
    root = Path(path)
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def blob(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


# -- isolation and exactness --------------------------------------------------------------------------------


def test_a_run_appending_beside_its_script_changes_its_own_copy_only(repo: Path, tmp_path: Path) -> None:
    (repo / "results.csv").write_text("header\n")
    (repo / "train.py").write_text(
        textwrap.dedent("""
        from pathlib import Path
        results = Path(__file__).parent / "results.csv"
        print(results.read_text(), end="")
        with results.open("a") as f:
            f.write("row\\n")
        """)
    )
    commit_all(repo)
    spec = spec_for(repo / "train.py", tmp_path / "runs")
    seen = []
    for run in ("run-1", "run-2"):
        info = take_at(spec, tmp_path / run)
        seen.append(subprocess.run([sys.executable, info.script], capture_output=True, text=True, check=False).stdout)
    assert seen == ["header\n", "header\n"]  # the second run never sees the first run's row
    store = tmp_path / "runs" / ".snapshots" / "v2"
    assert object_path(store, blob(b"header\n")).read_bytes() == b"header\n"


def test_a_skip_worktree_edit_is_stored_under_its_own_id(repo: Path, tmp_path: Path) -> None:
    (repo / "lib.py").write_text("X = 'A'\n")
    commit_all(repo)
    git(repo, "update-index", "--skip-worktree", "lib.py")
    (repo / "lib.py").write_text("X = 'BB'\n")  # git's index still names A's blob (another size: no racy-clean)
    spec = spec_for(repo / "train.py", tmp_path / "runs")
    assert files_in(take_at(spec, tmp_path / "one").path)["lib.py"] == "X = 'BB'\n"
    git(repo, "update-index", "--no-skip-worktree", "lib.py")
    git(repo, "checkout", "lib.py")
    assert files_in(take_at(spec, tmp_path / "two").path)["lib.py"] == "X = 'A'\n"  # A runs A, not B


def test_an_edit_after_listing_is_stored_as_read_under_the_id_of_what_was_read(repo: Path, tmp_path: Path) -> None:
    (repo / "lib.py").write_text("X = 'A'\n")
    commit_all(repo)
    spec = spec_for(repo / "train.py", tmp_path / "runs")
    preview = check(spec)
    assert preview is not None
    (repo / "lib.py").write_text("X = 'C'\n")  # lands between the listing and the copy
    store = open_store(tmp_path / "runs")
    for item in resolve(store, preview.manifest).items:
        assert item.ref == blob(object_path(store, item.ref).read_bytes()), item


@AS_ROOT
def test_objects_not_the_owners_are_not_trusted(repo: Path, tmp_path: Path) -> None:
    spec = spec_for(repo / "train.py", tmp_path / "runs")
    take_at(spec, tmp_path / "one")
    (repo / "lib.py").write_text("SAFE = True\n")
    commit_all(repo)
    store = tmp_path / "runs" / ".snapshots" / "v2"
    planted = object_path(store, blob(b"SAFE = True\n"))
    planted.parent.mkdir(exist_ok=True)
    planted.write_text("SAFE = 1#\n")  # same size, other bytes, someone else's file
    os.chown(planted, NOBODY, NOBODY)
    assert files_in(take_at(spec, tmp_path / "two").path)["lib.py"] == "SAFE = True\n"


@AS_ROOT
def test_a_store_owned_by_someone_else_is_refused_in_one_line(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "runs" / ".snapshots").mkdir(parents=True, mode=0o700)
    os.chown(tmp_path / "runs" / ".snapshots", NOBODY, NOBODY)
    with pytest.raises(SpecError) as err:
        take_at(spec_for(repo / "train.py", tmp_path / "runs"), tmp_path / "one")
    message = str(err.value)
    assert "\n" not in message and "belongs to" in message and "uid 65534" in message
    assert "run_dir of your own" in message and "snapshot: off" in message


# -- privacy ----------------------------------------------------------------------------------------------------


def test_modes_are_never_widened_and_the_umask_applies(repo: Path, tmp_path: Path) -> None:
    for name in (".env", "id_rsa"):
        (repo / name).write_text("secret\n")
        (repo / name).chmod(0o600)
    commit_all(repo)
    old = os.umask(0o027)
    try:
        info = take_at(spec_for(repo / "train.py", tmp_path / "runs"), tmp_path / "one")
    finally:
        os.umask(old)
    code = Path(info.path)
    assert {n: (code / n).stat().st_mode & 0o777 for n in (".env", "id_rsa", "train.py")} == {
        ".env": 0o600,
        "id_rsa": 0o600,
        "train.py": 0o640,
    }
    assert code.stat().st_mode & 0o777 == 0o750
    assert (tmp_path / "runs" / ".snapshots").stat().st_mode & 0o777 == 0o700


def test_dir_mode_leaves_out_hidden_files_and_says_so(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)\n")
    (code / ".env").write_text("TOKEN=x\n")
    info = take_at(spec_for(code / "train.py", tmp_path / "runs", "dir"), tmp_path / "one")
    assert files_in(info.path) == {"train.py": "print(1)\n"}
    assert info.left_out == (".env (hidden)",)
    assert left_out_lines(info.skipped, info.left_out) == ["          left out: .env (hidden)"]


# -- completeness -----------------------------------------------------------------------------------------------


def test_links_inside_stay_links_and_relative_links_leaving_the_tree_are_snapshotted(tmp_path: Path) -> None:
    shared = tmp_path / "shared_lib"
    shared.mkdir()
    (shared / "helper.py").write_text("VALUE = 42\n")
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "real.py").write_text("R = 1\n")
    (code / "alias.py").symlink_to("pkg/real.py")
    (code / "lib").symlink_to("../shared_lib")
    (code / "data").symlink_to("/")  # absolute, outside: stays a link (data is not the code's to pin)
    (code / "train.py").write_text("from lib.helper import VALUE\nprint(VALUE)\n")
    for mode in ("dir", "git"):
        if mode == "git":
            git(code, "init", "-q", "-b", "main")
            commit_all(code)
        info = take_at(spec_for(code / "train.py", tmp_path / f"runs-{mode}", mode), tmp_path / mode)
        copy = Path(info.path)
        assert (copy / "alias.py").is_symlink() and (copy / "alias.py").readlink() == Path("pkg/real.py")
        assert not (copy / "lib").is_symlink() and (copy / "lib" / "helper.py").read_text() == "VALUE = 42\n"
        assert (copy / "data").readlink() == Path("/")
        done = subprocess.run([sys.executable, info.script], capture_output=True, text=True, cwd=tmp_path, check=False)
        assert done.stdout == "42\n", (mode, done.stderr)


def test_a_link_leaving_the_tree_to_nothing_is_refused_naming_it(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)\n")
    (code / "lib").symlink_to("../missing")
    with pytest.raises(SpecError, match=r"code/lib is a symbolic link to '\.\./missing', outside .* nothing is there"):
        take_at(spec_for(code / "train.py", tmp_path / "runs", "dir"), tmp_path / "one")


def test_a_sparse_checkout_is_snapshotted_as_its_work_tree(repo: Path, tmp_path: Path) -> None:
    (repo / "other").mkdir()
    (repo / "other" / "big.txt").write_text("elsewhere\n")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "run.py").write_text("print(1)\n")
    commit_all(repo)
    git(repo, "sparse-checkout", "set", "jobs")
    assert not (repo / "other" / "big.txt").exists()
    info = take_at(spec_for(repo / "jobs" / "run.py", tmp_path / "runs"), tmp_path / "one")
    assert set(files_in(info.path)) == {"jobs/run.py", "train.py"}


def test_dir_mode_honours_gitignore_excludes_and_leaves_out_data(tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / "ckpt").mkdir(parents=True)
    (code / "outputs").mkdir()
    (code / "train.py").write_text("print(1)\n")
    (code / ".gitignore").write_text("outputs/\n*.log\n")
    (code / "outputs" / "x.txt").write_text("x")
    (code / "run.log").write_text("log")
    (code / "ckpt" / "model.pt").write_bytes(b"\0" * 10)
    (code / "tiny.npy").write_bytes(b"\0")
    (code / "notes.md").write_text("n")
    (code / "big.csv").write_bytes(b"\0" * (17 << 20))
    spec = spec_for(code / "train.py", tmp_path / "runs", "dir", exclude=("notes.md", "!tiny.npy"))
    info = take_at(spec, tmp_path / "one")
    assert set(files_in(info.path)) == {"train.py", "tiny.npy"}
    assert info.left_out == (
        ".gitignore (hidden)",
        "big.csv (data-like: 17 MB > 16 MB)",
        "ckpt/model.pt (data-like: *.pt)",
    )


# -- bounds and errors ------------------------------------------------------------------------------------------


def run_limited(tmp_path: Path, code: str, **limits: int) -> subprocess.CompletedProcess[str]:
    """`code` in a child Python under resource limits (RLIMIT_AS, RLIMIT_FSIZE), with SIGXFSZ ignored."""
    setup = "import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n" + "".join(
        f"resource.setrlimit(resource.RLIMIT_{k}, ({v}, {v}))\n" for k, v in limits.items()
    )
    return subprocess.run(
        [sys.executable, "-c", setup + code], capture_output=True, text=True, cwd=tmp_path, check=False
    )


def test_git_mode_checks_sizes_before_reading_an_untracked_file(repo: Path, tmp_path: Path) -> None:
    with (repo / "huge.dat").open("wb") as f:
        f.truncate(3 << 30)  # sparse: costs no disk, but 3 GB to read whole
    script = (
        "from ddpctl.snapshot import check; from ddpctl.spec import JobSpec; from ddpctl.errors import SpecError\n"
        f"try: check(JobSpec(name='t', script={str(repo / 'train.py')!r}, run_dir='runs'))\n"
        "except SpecError as e: print(e)\n"
    )
    done = run_limited(tmp_path, script, AS=1 << 30)
    assert "MB of code to snapshot (huge.dat alone is 3072.0 MB); allowed are" in done.stdout, done.stderr


def test_a_name_that_is_not_utf8_is_refused_in_one_line(repo: Path, tmp_path: Path) -> None:
    os.close(os.open(os.fsencode(repo) + b"/caf\xe9.py", os.O_WRONLY | os.O_CREAT))
    for mode in ("git", "dir"):
        with pytest.raises(SpecError) as err:
            check(spec_for(repo / "train.py", tmp_path / "runs", mode))
        assert "\n" not in str(err.value) and "'caf\\\\xe9.py' is not UTF-8" in str(err.value), mode


def test_a_full_disk_leaves_no_partial_object_and_names_the_store(repo: Path, tmp_path: Path) -> None:
    (repo / "weights.py").write_bytes(b"#" * (1 << 20))
    commit_all(repo)
    script = (
        "from pathlib import Path; from ddpctl.snapshot import take; from ddpctl.spec import JobSpec\n"
        "from ddpctl.errors import SpecError\n"
        f"spec = JobSpec(name='t', script={str(repo / 'train.py')!r}, run_dir='runs')\n"
        "Path('stage').mkdir()\n"
        "try: take(spec, Path('stage/snapshot.json'), Path('stage/code'))\n"
        "except SpecError as e: print(e)\n"
    )
    done = run_limited(tmp_path, script, FSIZE=64 << 10)  # writes past 64 KiB fail (EFBIG), like a full disk
    store = tmp_path / "runs" / ".snapshots" / "v2"
    assert f"writing to the code snapshot store {store} failed: File too large" in done.stdout, done.stderr
    assert "partial file was removed" in done.stdout
    assert [p for p in store.rglob("*") if p.is_file() and p.stat().st_size >= 64 << 10] == []
    assert list((store / "tmp").iterdir()) == []


@pytest.mark.parametrize("value", ["²", "٣", "-1", "1e3", " 7", "9" * 20])
def test_limits_from_env_take_ascii_digits_only(value: str) -> None:
    with pytest.raises(SpecError, match=r"DDPCTL_SNAPSHOT_MAX_FILES: got .*, expected a whole number"):
        Limits.from_env({"DDPCTL_SNAPSHOT_MAX_FILES": value})
    assert whole_number({"X": "12"}, "X", 1) == 12


# -- truthful reporting -----------------------------------------------------------------------------------------


def test_ddpctls_own_staging_dir_does_not_make_a_clean_tree_dirty(repo: Path) -> None:
    stage = repo / "runs" / "t" / ".staging-abc"  # run_dir: runs inside the repository, not ignored
    info = take_at(spec_for(repo / "train.py", repo / "runs"), stage)
    assert not info.dirty and set(files_in(info.path)) == {"train.py"}


def test_submodules_are_named_for_submit(repo: Path) -> None:
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{git(repo, 'rev-parse', 'HEAD')},vendor/dep")
    git(repo, "commit", "-qm", "submodule")
    preview = check(spec_for(repo / "train.py", repo / "runs"))
    assert preview is not None and preview.manifest.skipped == ["vendor/dep"]
    assert left_out_lines(preview.manifest.skipped, []) == ["          not snapshotted (git submodules): vendor/dep"]
