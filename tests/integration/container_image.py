"""A real Charliecloud directory image for the container tests: Debian 12 (debootstrap) + torch + this ddpctl.

Two layers, each cached outside the repo under a key of its content, so repeated runs reuse them:
- base-<key>: `debootstrap --variant=minbase --include=python3 bookworm` plus torch, numpy, PyYAML and Jinja2
  installed into the image's /usr/local/lib/python3.11/dist-packages (by this host's pip with `--target`: the
  image has no pip, and Debian 12's python3 is 3.11 like the wheels). About 45 s on first build.
- ddpctl-<key>: a hard-link copy of the base with this checkout's ddpctl installed (keyed by its sources).
The image is a separate root: its python3 is Debian's /usr/bin/python3, not the host's interpreter.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from clitools import REPO

SUITE = "bookworm"
BASE_PACKAGES = ("torch==2.13.0", "numpy", "PyYAML", "Jinja2")
SITE = "usr/local/lib/python3.11/dist-packages"  # on Debian 12's python3 sys.path
KEEP = 3  # ddpctl layers kept (older ones are removed)


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddpctl-test-images"
    return Path(os.environ.get("DDPCTL_TEST_IMAGE_CACHE") or default)


def debian_mirror() -> str:
    """The mirror apt uses here (deb822 or one-line sources), else deb.debian.org."""
    for path in sorted(Path("/etc/apt").glob("sources.list*")) + sorted(Path("/etc/apt/sources.list.d").glob("*")):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or re.search(
            r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+/debian)\s+bookworm\b", text, re.M
        )
        if found:
            return found.group(1)
    return "http://deb.debian.org/debian"


def _key(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def ddpctl_sources_key() -> str:
    files = sorted([*REPO.glob("ddpctl/**/*.py"), *REPO.glob("templates/*"), REPO / "pyproject.toml"])
    return _key(*(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() for p in files if p.is_file()))


def _pip(target: Path, *args: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            str(target / SITE),
            *args,
        ],
        check=True,
        timeout=900,
    )


def _build_base(dest: Path) -> None:
    subprocess.run(
        ["debootstrap", "--variant=minbase", "--include=python3", SUITE, str(dest), debian_mirror()],
        check=True,
        timeout=900,
        stdout=subprocess.DEVNULL,
    )
    (dest / "etc" / "hosts").touch()  # ch-run binds the host's /etc/hosts (node names) only onto an existing file
    _pip(dest, *BASE_PACKAGES)


def _build_layer(base: Path, dest: Path) -> None:
    subprocess.run(["cp", "-al", str(base), str(dest)], check=True, timeout=300)
    _pip(dest, "--no-deps", "--no-build-isolation", str(REPO))


def _cached(path: Path, build: object) -> Path:
    if path.is_dir():
        return path
    partial = path.with_name(path.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    build(partial)  # type: ignore[operator]
    partial.rename(path)  # complete or absent: a killed build leaves only a .partial dir
    return path


def ensure_image() -> tuple[Path, dict[str, float]]:
    """The image directory for this checkout (built if needed) and the seconds each layer took to build."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    base_key = _key(SUITE.encode(), " ".join(BASE_PACKAGES).encode(), SITE.encode(), b"minbase,python3,hosts")
    timings: dict[str, float] = {}
    with (root / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel sessions share the cache: one builds, the others reuse
        for stale in root.glob("*.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        start = time.monotonic()
        base = _cached(root / f"base-{base_key}", _build_base)
        timings["base"] = time.monotonic() - start
        start = time.monotonic()
        image = _cached(root / f"ddpctl-{base_key}-{ddpctl_sources_key()}", lambda d: _build_layer(base, d))
        timings["ddpctl"] = time.monotonic() - start
        layers = sorted(root.glob("ddpctl-*"), key=lambda p: p.stat().st_mtime)
        for old in [p for p in layers if p != image][: max(0, len(layers) - KEEP)]:
            shutil.rmtree(old, ignore_errors=True)
    return image, timings
