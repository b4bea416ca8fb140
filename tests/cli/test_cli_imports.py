"""The CLI must not import torch, rich or submitit on paths that do not need them (start-up time)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpctl.cli.common import imports_uncollected

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "rich", "submitit", "numpy", "argcomplete")  # argcomplete: only when a shell asks
PROBE = """
import json, sys
from ddpctl.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(({m.split('.')[0] for m in sys.modules} | set(sys.modules)) & set(HEAVY))), file=sys.stderr)
"""


def heavy_imports(*argv: str, env: dict[str, str] | None = None, watch: tuple[str, ...] = HEAVY) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("HEAVY", repr(watch)), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("render", "jobs/example.yaml"),
        ("submit", "jobs/example.yaml", "--dry-run"),
        ("sweep", "jobs/example.yaml", "--grid", "env.LR=0.1,0.01", "--dry-run"),
        ("env", "--json"),
        ("clusters",),
        ("render", "jobs/nonexistent.yaml"),
    ],
)
def test_light_paths_import_nothing_heavy(argv: tuple[str, ...]) -> None:
    assert heavy_imports(*argv) == []


def test_status_of_a_local_job_imports_nothing_heavy(tmp_path: Path) -> None:
    from ddpctl.run.registry import JobRecord, Registry

    Registry(tmp_path).add(JobRecord("local-1", "x", str(tmp_path / "run"), "local", 0.0))
    assert heavy_imports("status", "x", "--json", env={**os.environ, "DDPCTL_HOME": str(tmp_path)}) == []


def test_probe_detects_a_heavy_import(tmp_path: Path) -> None:
    # `list` draws a rich table: the probe must see rich, or it could never catch a regression.
    assert heavy_imports("list", "--no-state", env={**os.environ, "DDPCTL_HOME": str(tmp_path)}) == ["rich"]


def test_render_imports_only_what_a_valid_spec_needs() -> None:
    # `render` is run as a fresh process (benchmarks/bench_render.py): difflib is imported only for a misspelt
    # key's suggestion, the heavy ones above never.
    assert heavy_imports("render", "jobs/example.yaml", watch=("difflib", *HEAVY)) == []


def test_render_imports_no_socket_and_no_other_command() -> None:
    # Start-up time (benchmarks/README.md, bench_render.py): safeio names the host with os.uname, not socket (~3 ms
    # of imports), and the `sweep results` command name and the --backend choices live in cli.common, so `render`
    # loads neither cli.sweep nor cli.submit.
    watch = ("socket", "ddpctl.cli.sweep", "ddpctl.cli.submit")
    assert heavy_imports("render", "jobs/example.yaml", watch=watch) == []


GC_PROBE = """
import gc, sys
from ddpctl.cli import main
before = gc.get_freeze_count()
code = main(sys.argv[1:])
print(code, gc.isenabled(), before, gc.get_freeze_count(), file=sys.stderr)
"""


def test_a_fresh_render_freezes_what_its_imports_made_and_collects_again() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GC_PROBE, "render", "jobs/example.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    code, enabled, before, after = done.stderr.split()[-4:]
    assert (code, enabled, before) == ("0", "True", "0")
    assert int(after) > 10_000  # Jinja2's, PyYAML's and the spec's modules: ~28,000 objects


def test_imports_run_with_the_collector_paused_then_frozen() -> None:
    before = gc.get_freeze_count()
    try:
        with imports_uncollected("a.module.nobody.imported"):
            assert not gc.isenabled()
            made = [[index] for index in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(made)
    finally:
        gc.unfreeze()  # this test process's objects go back to the collector


def test_a_process_that_has_the_module_already_is_left_as_it_is() -> None:
    before = gc.get_freeze_count()
    with imports_uncollected("ddpctl.cli"):
        assert gc.isenabled()
    assert gc.get_freeze_count() == before
