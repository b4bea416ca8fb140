"""Where a spec's relative paths point: written in the file, from the file's directory; from a --set (or a Python
mapping, which has no file), from the current directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl import api
from ddpctl.errors import SpecError
from ddpctl.spec import JobSpec, load_spec, resolve_paths, spec_from_mapping
from ddpctl.spec.paths import absolute

HEAD = "name: demo\nscript: t.py\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/spec/x.yaml is the spec file; the current directory is tmp/cwd (a sibling)."""
    for folder in ("spec", "cwd"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("HOME", "/home/me")
    return tmp_path


def loaded(tree: Path, text: str, overrides: tuple[str, ...] = ()) -> JobSpec:
    (tree / "spec" / "x.yaml").write_text(text)
    return load_spec(tree / "spec" / "x.yaml", overrides, check_paths=False)


SPEC, CWD = "{spec}", "{cwd}"
CONTAINER_RUNTIMES_USED = ("apptainer", "pyxis", "charliecloud", "podman")
APPTAINER, PYXIS, CHARLIE, PODMAN = ("container: {runtime: " + r + ", image: " for r in CONTAINER_RUNTIMES_USED)


@pytest.mark.parametrize(
    ("body", "overrides", "field", "expected"),
    [
        ("", (), "script", f"{SPEC}/t.py"),
        ("", ("script=t.py",), "script", f"{CWD}/t.py"),
        ("", ("script=/abs/t.py",), "script", "/abs/t.py"),
        ("", ("script=~/t.py",), "script", "/home/me/t.py"),
        ("", (), "run_dir", f"{SPEC}/runs"),  # the default too: never the current directory's runs/
        ("run_dir: out\n", (), "run_dir", f"{SPEC}/out"),
        ("run_dir: ../out\n", (), "run_dir", "{tmp}/out"),  # spec/ is a real directory: .. folded
        ("run_dir: /abs/out\n", (), "run_dir", "/abs/out"),
        ("run_dir: ~/out\n", (), "run_dir", "/home/me/out"),
        ("run_dir: out\n", ("run_dir=out",), "run_dir", f"{CWD}/out"),
        ("run_dir: out\n", ("nodes=2",), "run_dir", f"{SPEC}/out"),
        ("checkpoint: {dir: c}\n", (), "checkpoint.dir", f"{SPEC}/c"),
        ("checkpoint: {dir: c}\n", ("checkpoint.keep=2",), "checkpoint.dir", f"{SPEC}/c"),
        ("checkpoint: {dir: c}\n", ("checkpoint.dir=c",), "checkpoint.dir", f"{CWD}/c"),
        ("", ("checkpoint={dir: c}",), "checkpoint.dir", f"{CWD}/c"),
        ("", (), "checkpoint.dir", None),
        ("template: t/my.sbatch.j2\n", (), "template", f"{SPEC}/t/my.sbatch.j2"),
        ("template: my.j2\n", ("template=my.j2",), "template", f"{CWD}/my.j2"),
        ("template: ddp\n", (), "template", "ddp"),
        ("python: venv/bin/python\n", (), "python", f"{SPEC}/venv/bin/python"),
        ("python: python3.11\n", (), "python", "python3.11"),
        (APPTAINER + "img.sif}\n", (), "container.image", f"{SPEC}/img.sif"),
        (APPTAINER + "'docker://x/y'}\n", (), "container.image", "docker://x/y"),
        ("container: {runtime: singularity, image: i.sif}\n", ("nodes=2",), "container.image", f"{SPEC}/i.sif"),
        (PYXIS + "./x.sqsh}\n", (), "container.image", f"{SPEC}/x.sqsh"),
        (PYXIS + "'nvcr.io#nvidia/pytorch'}\n", (), "container.image", "nvcr.io#nvidia/pytorch"),
        (CHARLIE + "img/deb}\n", (), "container.image", f"{SPEC}/img/deb"),
        (CHARLIE + "deb}\n", (), "container.image", "deb"),  # a name in ch-run's image storage
        (CHARLIE + "deb}\n", ("container.image=i/d",), "container.image", f"{CWD}/i/d"),
        (PODMAN + "'docker.io/library/debian:12'}\n", (), "container.image", "docker.io/library/debian:12"),
        (PODMAN + "debian}\n", (), "container.image", "debian"),  # a name in podman's image storage
        (PODMAN + "./img/deb}\n", (), "container.image", f"{SPEC}/img/deb"),  # a root directory (--rootfs)
        (APPTAINER + "i.sif, workdir: w}\npython: venv/bin/python\n", (), "python", "venv/bin/python"),  # image's
        (APPTAINER + "i.sif, workdir: w}\n", (), "container.workdir", "w"),  # a path inside the image
        ("args: [data/x]\nsetup: [source venv/bin/activate]\n", (), "args", ("data/x",)),
        ("args: [data/x]\nsetup: [source venv/bin/activate]\n", (), "setup", ("source venv/bin/activate",)),
    ],
)  # fmt: skip
def test_which_directory_a_path_starts_at(
    tree: Path, body: str, overrides: tuple[str, ...], field: str, expected: object
) -> None:
    spec = loaded(tree, HEAD + body, overrides)
    value: object = spec
    for part in field.split("."):
        value = getattr(value, part)
    if isinstance(expected, str):
        expected = expected.format(spec=tree / "spec", cwd=tree / "cwd", tmp=tree)
    assert value == expected


@pytest.mark.parametrize(
    ("value", "base", "expected"),
    [
        ("t.py", "/no/such/jobs", "/no/such/jobs/t.py"),
        ("./a/./t.py", "/no/such", "/no/such/a/t.py"),
        ("a/../t.py", "/no/such", "/no/such/a/../t.py"),  # a is no directory: what .. means is the kernel's
        ("/abs/t.py", "/no/such", "/abs/t.py"),
        ("../t.py", "{tmp}/real", "{tmp}/t.py"),
        ("../../t.py", "{tmp}/real/inner", "{tmp}/t.py"),
        ("../t.py", "{tmp}/link", "{tmp}/link/../t.py"),  # link -> real/inner: .. is real/, not tmp/
        ("../../t.py", "{tmp}/link", "{tmp}/link/../../t.py"),
        ("inner/../t.py", "{tmp}/real", "{tmp}/real/t.py"),
        ("x/../t.py", "{tmp}/real", "{tmp}/real/x/../t.py"),
    ],
)
def test_absolute(tmp_path: Path, value: str, base: str, expected: str) -> None:
    (tmp_path / "real" / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "inner")
    assert absolute(value, Path(base.format(tmp=tmp_path))) == expected.format(tmp=tmp_path)


def test_a_missing_script_names_the_key_the_value_and_where_it_was_looked_for(tree: Path) -> None:
    (tree / "cwd" / "t.py").write_text("")  # beside the current directory is not where the spec means
    (tree / "spec" / "x.yaml").write_text(HEAD)
    with pytest.raises(SpecError) as info:
        load_spec(tree / "spec" / "x.yaml")
    where = tree / "spec" / "t.py"
    expected = f"{tree}/spec/x.yaml:2: script: got 't.py', expected an existing file (looked for {where})"
    assert str(info.value) == expected
    with pytest.raises(SpecError) as info:
        load_spec(tree / "spec" / "x.yaml", ["script=gone.py"])
    assert str(info.value) == (
        f"--set script=gone.py: script: got 'gone.py', expected an existing file (looked for {tree}/cwd/gone.py)"
    )
    assert load_spec(tree / "spec" / "x.yaml", ["script=t.py"]).script == str(tree / "cwd" / "t.py")


def test_a_missing_template_file_says_where_it_was_looked_for(tree: Path) -> None:
    (tree / "spec" / "t.py").write_text("")
    (tree / "spec" / "x.yaml").write_text(HEAD + "template: mine.j2\n")
    with pytest.raises(SpecError, match=r"template: got 'mine.j2', expected an existing .j2 file \(looked for "):
        load_spec(tree / "spec" / "x.yaml")


def test_a_relative_spec_path_starts_at_the_current_directory(tree: Path) -> None:
    (tree / "spec" / "t.py").write_text("")
    (tree / "spec" / "x.yaml").write_text(HEAD)
    assert load_spec("../spec/x.yaml").script == str(tree / "spec" / "t.py")


def test_a_mapping_has_no_file_so_its_paths_start_at_the_current_directory(tree: Path) -> None:
    (tree / "cwd" / "t.py").write_text("")
    spec = spec_from_mapping({"name": "demo", "script": "t.py"}, "x.yaml")
    assert (spec.script, spec.run_dir) == ("t.py", "runs")  # as written: resolve_paths makes them absolute
    assert resolve_paths(spec, Path.cwd()).run_dir == str(tree / "cwd" / "runs")
    with pytest.raises(SpecError, match=r"looked for .*/cwd/gone.py\)$"):
        spec_from_mapping({"name": "demo", "script": "gone.py"})


def test_api_overrides_start_at_the_given_cwd(tree: Path) -> None:
    (tree / "spec" / "t.py").write_text("")
    (tree / "spec" / "x.yaml").write_text(HEAD)
    spec = api.load_spec(tree / "spec" / "x.yaml", ["run_dir=out"], cwd=tree / "elsewhere")
    assert (spec.script, spec.run_dir) == (str(tree / "spec" / "t.py"), str(tree / "elsewhere" / "out"))
    # a spec already loaded keeps its paths when planned from anywhere
    assert api.spec_of(spec).script == spec.script
