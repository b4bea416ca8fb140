"""Bad input gives one line and exit 2: never a traceback, never a hang, nothing half-written (issue 10 #7-#9).

Every case runs the real CLI as a subprocess (as a user would meet it), under a memory and time limit, so that
the old behaviour (a traceback, or gigabytes for a merge-key bomb) fails the test instead of the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import REPO

from ddpctl.spec import load_spec
from ddpctl.spec.schema import MAX_NODES

TRAIN = str(REPO / "jobs/example/train.py")
MEMORY_LIMIT = 1 << 30  # 1 GiB of address space: ddpctl needs ~100 MB for any spec


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def ddpctl(cwd: Path, *args: str | bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ddpctl", *args],
        cwd=cwd,
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=limited,
        env={**os.environ, "DDPCTL_HOME": str(cwd / "home"), **(env or {})},
    )


def one_line_error(done: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    err = done.stderr.decode("utf-8", "backslashreplace")
    assert done.returncode == 2, (done.returncode, err)
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("ddpctl: error: "), err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "ok.yaml"
    path.write_text(f"name: probe\nscript: {TRAIN}\nbackend: local\nrun_dir: {tmp_path / 'runs'}\n")
    return path


def files_under(root: Path) -> set[str]:
    """What a failed command left, besides DDPCTL_HOME (the job counter and registry, not output)."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.relative_to(root).parts[0] != "home"}


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        (b"name: probe\x01\n", ("ok.yaml:1", "U+0001 is not allowed")),
        (b"name: probe\nargs: [a]\x1b[31m\n", ("ok.yaml:2", "U+001B")),
        (b'name: probe\nargs: ["\\udc80"]\n', ("args.0", "lone surrogates")),
        (b'name: probe\nenv: {A: "x\\udcff"}\n', ("env.A", "lone surrogates")),
        (b"name: \xff\n", ("not UTF-8",)),
    ],
)
def test_a_bad_spec_file_is_one_line_naming_the_file_and_the_problem(
    tmp_path: Path, body: bytes, needles: tuple[str, ...]
) -> None:
    path = tmp_path / "ok.yaml"
    path.write_bytes(body + f"script: {TRAIN}\n".encode())
    for command in (["render"], ["submit", "--dry-run"], ["submit"]):
        one_line_error(ddpctl(tmp_path, *command, str(path)), *needles)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ('args=["\\udc80"]', ("--set", "lone surrogates")),
        (b"args=[\xff]", ("--set", "byte 0xFF is not UTF-8")),
        (b"env.A=\xfe", ("--set", "byte 0xFE is not UTF-8")),
        ("run_dir=~nosuchuser/r", ("run_dir", "~nosuchuser/r", "names a user")),
        ("checkpoint.dir=~nosuchuser", ("checkpoint.dir", "names a user")),
        ("nodes=\x07", ("U+0007",)),
    ],
)
def test_a_bad_override_is_one_line_naming_the_key_and_the_value(
    tmp_path: Path, spec: Path, override: str | bytes, needles: tuple[str, ...]
) -> None:
    for command in (["render"], ["submit", "--dry-run"], ["submit"]):
        one_line_error(ddpctl(tmp_path, *command, str(spec), "--set", override), *needles)
    assert files_under(tmp_path) == {"ok.yaml"}


def test_render_output_errors_leave_nothing_behind(tmp_path: Path, spec: Path) -> None:
    one_line_error(
        ddpctl(tmp_path, "render", str(spec), "-o", "/nonexistent/x.sh"),
        "-o /nonexistent/x.sh",
        "No such file or directory",
    )
    (tmp_path / "adir").mkdir()
    one_line_error(ddpctl(tmp_path, "render", str(spec), "-o", str(tmp_path / "adir")), "is a directory")
    assert files_under(tmp_path) == {"ok.yaml", "adir"}


def test_an_unusable_run_dir_or_home_is_one_line_and_leaves_nothing(tmp_path: Path, spec: Path) -> None:
    # As root a read-only mode is no obstacle; a file where a directory must be is one for everybody.
    (tmp_path / "afile").write_text("")
    one_line_error(
        ddpctl(tmp_path, "submit", str(spec), "--set", f"run_dir={tmp_path / 'afile'}"),
        "run_dir: cannot create a run directory",
        "Not a directory",
    )
    one_line_error(
        ddpctl(tmp_path, "submit", str(spec), env={"DDPCTL_HOME": str(tmp_path / "afile" / "h")}),
        "registry",
        "not writable",
    )
    assert files_under(tmp_path) == {"ok.yaml", "afile"}


def test_a_merge_key_bomb_is_refused_before_it_grows(tmp_path: Path) -> None:
    items = ["&a0 {k0: 1}"] + [f"&a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: 1}}" for i in range(1, 40)]
    path = tmp_path / "bomb.yaml"
    path.write_text(f"name: bomb\nscript: {TRAIN}\nenv: {{<<: [{', '.join(items)}]}}\n")
    assert path.stat().st_size < 1500
    one_line_error(ddpctl(tmp_path, "render", str(path)), "bomb.yaml:3: env: more than 100000 YAML values")


def test_a_huge_spec_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(f"name: big\nscript: {TRAIN}\nargs: [{'x, ' * 600_000}x]\n")
    one_line_error(ddpctl(tmp_path, "render", str(path)), "larger than 1048576 bytes")


@pytest.mark.parametrize(
    "override",
    [
        "nodes=1000000000000",
        f"nodes={MAX_NODES + 1}",
        "nproc_per_node=5000",
        "requeue.max_failures=99999999999",
        "nccl.timeout_s=4294967296",
    ],
)
def test_spec_integers_are_bounded(tmp_path: Path, spec: Path, override: str) -> None:
    one_line_error(ddpctl(tmp_path, "submit", str(spec), "--dry-run", "--set", override), "expected an integer in")


@pytest.mark.parametrize(
    ("override", "value"),
    [
        ("nodes=010", 10),
        ("nodes=+3", 3),
        ("nproc_per_node=007", 7),
        ("requeue.lead_s=0600", 600),
    ],
)
def test_spec_integers_read_as_written(spec: Path, override: str, value: int) -> None:
    key = override.split("=", maxsplit=1)[0].split(".")
    loaded = load_spec(spec, [override])
    assert getattr(loaded if len(key) == 1 else getattr(loaded, key[0]), key[-1]) == value


@pytest.mark.parametrize(
    "override",
    [
        "nodes=1:00",
        "nodes=0x10",
        "nodes=0o7",
        "nodes=0b11",
        "nodes=1_000",
        "checkpoint.keep=1:0:0",
        "requeue.lead_s=0x3c",
    ],
)
def test_yaml_11_integer_forms_are_refused(tmp_path: Path, spec: Path, override: str) -> None:
    one_line_error(ddpctl(tmp_path, "render", str(spec), "--set", override), "expected an integer in")
