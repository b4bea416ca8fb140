"""sbatch / squeue / scontrol / scancel calls (through an injectable Runner) and pure parsers of their output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ddpctl.errors import CommandError
from ddpctl.proc import Completed, Runner, check, run
from ddpctl.slurm import scontrol

# `%i|%T|%r|%N|%M`: cheap and stable across Slurm versions (the --json schema is not).
SQUEUE_FORMAT = "%i|%T|%r|%N|%M"


@dataclass(frozen=True)
class QueueRow:
    job_id: str
    state: str
    reason: str
    nodes: str
    elapsed: str


def parse_job_id(sbatch_stdout: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER`."""
    first = sbatch_stdout.strip().splitlines()[0] if sbatch_stdout.strip() else ""
    job_id = first.split(";")[0].strip()
    if not job_id.replace("_", "").isdigit():
        raise CommandError(f"sbatch printed no job id: {sbatch_stdout.strip()!r}")
    return job_id


def parse_squeue(text: str) -> list[QueueRow]:
    rows = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 5:
            rows.append(QueueRow(*parts))
    return rows


def parse_scontrol_job(text: str) -> scontrol.Fields:
    """`scontrol show job -o ID`: one line of KEY=VALUE words, read by the one scontrol parser (keys in any case;
    a value may hold spaces, as Command= and WorkDir= do)."""
    return scontrol.parse_line_fields(text.strip())


def sbatch(script: str, extra: Sequence[str] = (), runner: Runner = run, args: Sequence[str] = ()) -> str:
    return parse_job_id(check(["sbatch", "--parsable", *extra, script, *args], runner).stdout)


def squeue(job_id: str, runner: Runner = run) -> QueueRow | None:
    done = runner(["squeue", "-h", "-j", job_id, "-o", SQUEUE_FORMAT])
    if done.returncode != 0:  # squeue errors for ids it has already forgotten
        return None
    rows = parse_squeue(done.stdout)
    return rows[0] if rows else None


def queued(job_ids: Sequence[str], runner: Runner = run) -> set[str] | None:
    """Which of these jobs squeue lists now (queued, running, completing), in one call; None: squeue could not
    answer. squeue skips ids it has forgotten when given several, but fails for a single forgotten one."""
    if not job_ids:
        return set()
    done = runner(["squeue", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(job_ids)])
    if done.returncode != 0:
        return set() if len(job_ids) == 1 and "Invalid job id" in done.stderr else None
    return {row.job_id for row in parse_squeue(done.stdout)}


def show_job(job_id: str, runner: Runner = run) -> scontrol.Fields:
    done = runner(["scontrol", "show", "job", "-o", job_id])
    return parse_scontrol_job(done.stdout) if done.returncode == 0 else scontrol.Fields()


def scancel(job_id: str, *options: str, runner: Runner = run) -> None:
    check(["scancel", *options, job_id], runner)


def scancel_unchecked(job_id: str, runner: Runner = run) -> None:
    """Best-effort cancel while cleaning up after another error (which must stay the one reported)."""
    runner(["scancel", job_id])


def _quick(argv: Sequence[str]) -> Completed:
    # Asked while a stop signal is being handled: a hung slurmctld must not eat the checkpoint's lead time.
    return run(argv, timeout=10)


def time_left(job_id: str, runner: Runner = _quick) -> str | None:
    """squeue's `%L` for the job (e.g. `1:59`, `UNLIMITED`); None when squeue does not know it."""
    done = runner(["squeue", "-h", "-j", job_id, "-o", "%L"])
    return done.stdout if done.returncode == 0 else None


def release(job_id: str, runner: Runner = run) -> None:
    check(["scontrol", "release", job_id], runner)


def show_config(runner: Runner = run) -> Completed:
    """`scontrol show config` (JobRequeue, PreemptMode, ...), unchecked: a cluster may refuse it."""
    return runner(["scontrol", "show", "config"])


def show_partitions(runner: Runner = run) -> Completed:
    """`scontrol show partition -o`: one line of KEY=VALUE words per partition, unchecked."""
    return runner(["scontrol", "show", "partition", "-o"])


def show_nodes(runner: Runner = run) -> Completed:
    """`scontrol show node -o`: one line of KEY=VALUE words per node (Gres, Partitions, ...), unchecked."""
    return runner(["scontrol", "show", "node", "-o"])
