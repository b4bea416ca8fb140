"""Stand-in commands on PATH for tests that run a batch script or a backend without Slurm: a stub records how
it was called (argv and environment) so the test can check what the script asked of Slurm."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# Each call of a stub leaves $STUB_OUT/<its name>/argv.<n> and env.<n> (NUL-separated), n counting from 0.
RECORDING_STUB = """#!/bin/bash
out="$STUB_OUT/$(basename "$0")"
mkdir -p "$out"
n=$(ls "$out" | wc -l)
printf '%s\\0' "$@" > "$out/argv.$n"
env -0 > "$out/env.$n"
"""


def write_command(bin_dir: Path, name: str, script: str = "#!/bin/sh\nexit 1\n") -> Path:
    """An executable `name` in `bin_dir` (made if missing) running `script`; by default one that is only
    looked up on PATH, never run."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(script)
    path.chmod(0o755)
    return path


def on_path(bin_dir: Path, env: Mapping[str, str] = os.environ) -> str:
    """PATH with `bin_dir` first, so its stand-ins are found before the real commands."""
    return f"{bin_dir}{os.pathsep}{env['PATH']}"


def recorded_argv(out: Path, name: str, n: int = 0) -> list[str]:
    """The arguments of call `n` of the RECORDING_STUB called `name`."""
    return [a.decode() for a in (out / name / f"argv.{n}").read_bytes().split(b"\0")[:-1]]


def recorded_env(out: Path, name: str, n: int = 0) -> dict[str, str]:
    """The environment call `n` of the RECORDING_STUB called `name` saw."""
    items = (out / name / f"env.{n}").read_bytes().split(b"\0")[:-1]
    return dict(item.decode().split("=", 1) for item in items)
