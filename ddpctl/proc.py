"""The only module that starts external commands (argv lists only, never a shell string).

Code that needs sbatch/squeue/scontrol takes a `Runner` so tests can inject their own at this seam.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ddpctl.errors import CommandError


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str]], Completed]


def run(
    argv: Sequence[str], *, timeout: float | None = 60.0, env: Mapping[str, str] | None = None
) -> Completed:
    """Run argv and capture its output; a missing program becomes a CommandError naming it."""
    if shutil.which(argv[0], path=(env or {}).get("PATH")) is None:
        raise CommandError(f"command not found: {argv[0]!r} (is it installed and on PATH?)")
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CommandError(f"{argv[0]} did not answer within {timeout} s: {' '.join(argv)}") from exc
    return Completed(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


def check(argv: Sequence[str], runner: Runner = run) -> Completed:
    """Like run, but a non-zero exit becomes a CommandError carrying the command's own message."""
    done = runner(argv)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        detail = message[-1] if message else f"exit status {done.returncode}"
        raise CommandError(f"{argv[0]} failed: {detail}")
    return done


def available(program: str) -> bool:
    return shutil.which(program) is not None
