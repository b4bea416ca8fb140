"""The compiled-template cache (ddpctl.plan.tplcache): a fresh process renders from it; an entry it cannot trust
(another owner's, writable by others, a symlink, in a directory that is not privately ours, torn, for another
source) is never run, and the render still succeeds by compiling; an edited template is never served stale.

An entry is "planted" by writing, under the key the render will look up, the code of a different template (one
printing PLANTED): a render printing PLANTED ran the entry."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ddpctl.plan.render import make_environment, render_for
from ddpctl.plan.tplcache import CACHE_ENV, MAGIC, cache_dir
from ddpctl.spec import JobSpec, load_spec, resolve_paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "jobs" / "example.yaml"
PLANTED = "PLANTED {{ spec.name }}\n"


def example_spec() -> JobSpec:
    return resolve_paths(load_spec(EXAMPLE, ["nodes=2"]), ROOT)


def entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.code"))


def plant(entry: Path, template: Path, source: str = PLANTED) -> None:
    """Overwrite `entry` (keeping its name and header) with the compiled code of `source`."""
    code = make_environment(template.parent).compile(source, template.name, str(template))
    key = entry.name.removesuffix(".code")
    entry.write_bytes(MAGIC + key.encode() + b"\n" + marshal.dumps(code))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache" / "templates"
    monkeypatch.setenv(CACHE_ENV, str(directory))
    return directory


def shipped_template() -> Path:
    from ddpctl.spec.templates import template_path

    path = template_path(example_spec().template)
    assert path is not None
    return path


def test_a_fresh_process_renders_from_the_cache(cache: Path) -> None:
    argv = [sys.executable, "-m", "ddpctl", "render", str(EXAMPLE), "--set", "nodes=2"]
    first = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    [entry] = entries(cache)
    assert (cache.stat().st_mode & 0o777, entry.stat().st_mode & 0o777) == (0o700, 0o600)
    assert first.stdout == render_for(example_spec())  # the same script with and without the cache
    plant(entry, shipped_template())
    second = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert second.stdout == "PLANTED example\n"


def _other_owner(entry: Path, cache: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the entry to another user")
    os.chown(entry, 65534, 65534)


def _symlinked_entry(entry: Path, cache: Path) -> None:
    elsewhere = cache.parent / "elsewhere.code"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)


def _symlinked_dir(entry: Path, cache: Path) -> None:
    cache.rename(cache.with_name("real"))
    cache.symlink_to(cache.with_name("real"))


def _torn(entry: Path, cache: Path) -> None:
    entry.write_bytes(entry.read_bytes()[:-100])


def _another_key(entry: Path, cache: Path) -> None:
    # The entry of another source, copied under this source's name: its header names the other key.
    data = entry.read_bytes().replace(entry.name.removesuffix(".code").encode(), b"0" * 64, 1)
    entry.write_bytes(data)


Spoil = Callable[[Path, Path], None]
UNTRUSTED: dict[str, Spoil] = {
    "another-owner": _other_owner,
    "group-writable-entry": lambda entry, cache: entry.chmod(0o620),
    "world-writable-entry": lambda entry, cache: entry.chmod(0o602),
    "symlinked-entry": _symlinked_entry,
    "group-writable-dir": lambda entry, cache: cache.chmod(0o770),
    "symlinked-dir": _symlinked_dir,
    "torn-entry": _torn,
    "entry-of-another-key": _another_key,
}


@pytest.mark.parametrize("spoil", UNTRUSTED.values(), ids=UNTRUSTED.keys())
def test_an_untrusted_entry_is_never_run(spoil: Spoil, cache: Path) -> None:
    spec = example_spec()
    expected = render_for(spec)
    [entry] = entries(cache)
    plant(entry, shipped_template())
    assert render_for(spec) == "PLANTED example\n"  # the planted entry is run while it is trusted ...
    spoil(entry, cache)
    assert render_for(spec) == expected  # ... and compiled around once it is not


def test_an_edited_template_is_not_served_stale(tmp_path: Path, cache: Path) -> None:
    template = tmp_path / "mine.sbatch.j2"
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(f"name: mine\nscript: {ROOT / 'jobs' / 'example' / 'train.py'}\ntemplate: {template}\n")
    template.write_text("#!/bin/bash\necho one {{ spec.nodes }}\n")
    spec = resolve_paths(load_spec(spec_file, ["nodes=2"]), ROOT)
    assert render_for(spec) == "#!/bin/bash\necho one 2\n"
    template.write_text("#!/bin/bash\necho two {{ spec.nodes }}\n")
    assert render_for(spec) == "#!/bin/bash\necho two 2\n"
    assert len(entries(cache)) == 2


def test_an_unusable_cache_dir_still_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = example_spec()
    monkeypatch.setenv(CACHE_ENV, "off")
    expected = render_for(spec)
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(not_a_dir / "templates"))
    assert render_for(spec) == expected


@pytest.mark.parametrize(
    ("environ", "where"),
    [
        ({CACHE_ENV: "/c/t", "HOME": "/h"}, "/c/t"),
        ({CACHE_ENV: "off", "HOME": "/h"}, None),
        ({CACHE_ENV: "0"}, None),
        ({CACHE_ENV: ""}, None),
        ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/ddpctl/templates"),
        ({"HOME": "/h"}, "/h/.cache/ddpctl/templates"),
        ({"HOME": "relative"}, None),
        ({}, None),
    ],
)
def test_cache_dir(environ: dict[str, str], where: str | None) -> None:
    directory = cache_dir(environ)
    assert (str(directory) if directory else None) == where
