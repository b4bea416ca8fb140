"""One sbatch call whose outcome is never left ambiguous.

sbatch can report failure for a job the controller did create: a controller that stalls after taking the request
answers nothing, sbatch says "Socket timed out on send/recv operation", and the job appears once the controller
recovers (reproduced on the test cluster by stopping slurmctld; tests/cluster/README.md). So every submission is
tagged (its batch script's path, unique per submission, is what squeue's %o shows) and an ambiguous failure is
resolved before `submit` returns: the job found is adopted; one the controller does not have is not submitted; and
when the controller stays silent, the submission is withdrawn: its staging dir goes, and the batch script, given
that dir's name as its argument, exits at its start without training if it ever runs (templates/ddp.sbatch.j2).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ddpctl.errors import CommandError, CommandTimeout, ControllerUnreachable
from ddpctl.proc import Runner
from ddpctl.slurm import commands

RESOLVE_S_DEFAULT = 120.0  # how long a submit waits for a silent controller before it withdraws the submission
POLL_S = 2.0
ANSWERS_WITHOUT_JOB = 2  # a controller that twice answers without the job did not create it


def ambiguous(err: CommandError) -> bool:
    """sbatch failed in a way that may have created the job anyway (sent, then no answer)."""
    text = str(err)
    return isinstance(err, CommandTimeout) or any(
        marker in text for marker in ("Socket timed out", "Zero Bytes were transmitted", "Connection reset")
    )


def resolve_s() -> float:
    raw = os.environ.get("DDPCTL_SUBMIT_RESOLVE_S", "")
    try:
        value = float(raw) if raw.isascii() and raw.strip() else RESOLVE_S_DEFAULT
    except ValueError:
        return RESOLVE_S_DEFAULT
    return value if 0 <= value <= 3600 else RESOLVE_S_DEFAULT


def submit(
    script: Path,
    name: str,
    runner: Runner,
    query: Runner,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    extra: Sequence[str] = (),
) -> str:
    """sbatch `script` (in its staging dir, whose name it gets as its argument) with sbatch options `extra`;
    the job id, or CommandError saying exactly what became of the submission."""
    path = str(script.absolute())
    try:
        return commands.sbatch(path, extra, runner, args=[script.parent.name])
    except CommandError as err:
        if not ambiguous(err):
            raise
        first = str(err)
    found, answered = resolve(path, name, query, clock() + resolve_s(), clock=clock, sleep=sleep)
    if found is not None:
        found = found.partition("_")[0]  # a job array's pending tasks are listed as `<array job>_[0-3%2]`
        print(f"ddpctl: {first}; but the controller had created job {found}: submitted", file=sys.stderr)
        return found
    if answered:
        raise CommandError(
            f"{first}; the Slurm controller answers again and has no such job: not submitted (should a request it"
            " still holds create one, that job exits at its start without training)"
        )
    raise CommandError(
        f"{first}; the Slurm controller did not answer for {resolve_s():g} s, so whether it created the job is "
        "unknown: the submission is withdrawn, and a job it may yet create exits at its start without training"
    )


def resolve(
    path: str, name: str, query: Runner, deadline: float, *, clock: Callable[[], float], sleep: Callable[[float], None]
) -> tuple[str | None, bool]:
    """(the job created for `path`, whether the controller answered) once known or at the deadline."""
    answers = 0
    while True:
        try:
            found = commands.find_submitted(path, name, query)
            if found is not None:
                return found, True
            answers += 1
        except ControllerUnreachable:
            pass
        if answers >= ANSWERS_WITHOUT_JOB or clock() >= deadline:
            return None, answers > 0
        sleep(POLL_S)
