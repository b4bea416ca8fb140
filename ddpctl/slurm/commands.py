"""sbatch / squeue / scontrol / scancel calls (through an injectable Runner) and pure parsers of their output."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ddpctl.errors import CommandError, CommandTimeout, ControllerUnreachable
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


# What Slurm's clients print when the controller did not answer (not: answered with an error). "Socket timed out"
# is also the one ambiguous sbatch outcome: the request may have reached a controller that then stalled.
UNANSWERED = (
    "Unable to contact slurm controller",
    "Socket timed out on send/recv",
    "Zero Bytes were transmitted or received",
    "Connection reset by peer",
    "backup controller in standby mode",
)
# A query an interactive command waits for: Slurm's own MessageTimeout (10 s) and retries made `status` block
# 41 s during a controller outage; an answer slower than this is "not answering" to a person at a terminal.
QUERY_S_DEFAULT = 8.0


def query_s(env: dict[str, str] | None = None) -> float:
    raw = (env if env is not None else os.environ).get("DDPCTL_SLURM_QUERY_S", "")
    try:
        value = float(raw) if raw.isascii() and raw.strip() else QUERY_S_DEFAULT
    except ValueError:
        value = QUERY_S_DEFAULT
    return value if 0.5 <= value <= 600 else QUERY_S_DEFAULT


def bounded(argv: Sequence[str]) -> Completed:
    """The Runner for queries (squeue, scontrol show): at most query_s() seconds."""
    return run(argv, timeout=query_s())


def unanswered(text: str) -> bool:
    return any(marker in text for marker in UNANSWERED)


@dataclass
class Outage:
    """When this process first found the controller not answering (None: it has answered, or was not asked).
    One query that gave up stands for the next few: `status` of many jobs must not wait out the bound for each."""

    since: float | None = None
    last: float | None = None
    detail: str = ""
    runner: Runner | None = None  # the one that failed: another runner is another way to the controller
    REMEMBER_S = 20.0

    def ask(self, argv: Sequence[str], runner: Runner, now: Callable[[], float] = time.time) -> Completed:
        """Run a query; ControllerUnreachable when it (or one within REMEMBER_S) found no controller."""
        if runner is self.runner and self.last is not None and now() - self.last < self.REMEMBER_S:
            raise ControllerUnreachable(self.detail)
        try:
            done = runner(argv)
        except CommandTimeout as err:
            self.failed(now(), str(err), runner)
            raise ControllerUnreachable(self.detail) from err
        if done.returncode != 0 and unanswered(done.stderr):
            self.failed(now(), f"{argv[0]}: {done.stderr.strip().splitlines()[-1]}", runner)
            raise ControllerUnreachable(self.detail)
        if runner is self.runner:
            self.since = self.last = None
        return done

    def failed(self, at: float, detail: str, runner: Runner) -> None:
        if runner is not self.runner:
            self.since, self.runner = None, runner
        self.since = self.since or at
        self.last, self.detail = at, detail


OUTAGE = Outage()  # this process's view of the controller


def sbatch(script: str, extra: Sequence[str] = (), runner: Runner = run, args: Sequence[str] = ()) -> str:
    return parse_job_id(check(["sbatch", "--parsable", *extra, script, *args], runner).stdout)


def squeue(job_id: str, runner: Runner | None = None) -> QueueRow | None:
    """The job's row (None: squeue does not list it); ControllerUnreachable when nobody answered."""
    done = OUTAGE.ask(["squeue", "-h", "-j", job_id, "-o", SQUEUE_FORMAT], runner or bounded)
    if done.returncode != 0:  # squeue errors for ids it has already forgotten
        return None
    rows = parse_squeue(done.stdout)
    return rows[0] if rows else None


def queued(job_ids: Sequence[str], runner: Runner | None = None) -> set[str] | None:
    """Which of these jobs squeue lists now (queued, running, completing), in one call; None: squeue could not
    answer. squeue skips ids it has forgotten when given several, but fails for a single forgotten one."""
    if not job_ids:
        return set()
    done = OUTAGE.ask(["squeue", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(job_ids)], runner or bounded)
    if done.returncode != 0:
        return set() if len(job_ids) == 1 and "Invalid job id" in done.stderr else None
    return {row.job_id for row in parse_squeue(done.stdout)}


def array_tasks(array_job: str, runner: Runner | None = None) -> list[QueueRow] | None:
    """A job array's tasks that squeue lists now, one row each (`-r`: pending tasks too, not one `J_[2-3%2]` row);
    None: squeue could not answer."""
    done = OUTAGE.ask(["squeue", "-h", "-r", "-j", array_job, "-o", SQUEUE_FORMAT], runner or bounded)
    if done.returncode != 0:
        return [] if "Invalid job id" in done.stderr else None
    return parse_squeue(done.stdout)


def show_job(job_id: str, runner: Runner | None = None) -> scontrol.Fields:
    done = OUTAGE.ask(["scontrol", "show", "job", "-o", job_id], runner or bounded)
    return parse_scontrol_job(done.stdout) if done.returncode == 0 else scontrol.Fields()


def find_submitted(script: str, name: str, runner: Runner = run) -> str | None:
    """The job of ours whose batch script is `script` (an absolute path, unique per submission: squeue's %o is
    the path sbatch was given and the script's arguments), if the controller created one; ControllerUnreachable
    when it does not answer."""
    # Asked again every few seconds while the controller recovers: not silenced by the remembered outage.
    done = Outage().ask(["squeue", "-h", "--me", "-n", name, "-o", "%i|%o"], runner)
    if done.returncode != 0:
        raise CommandError(f"squeue failed: {(done.stderr or done.stdout).strip()[-300:]}")
    for line in done.stdout.splitlines():
        job_id, _, command = line.strip().partition("|")
        if command == script or command.startswith(f"{script} "):  # %o: the path, then the script's arguments
            return job_id
    return None


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


def exclude_nodes(job_id: str, nodes: Sequence[str], runner: Runner = run) -> None:
    """Set the job's ExcNodeList (it replaces the list: the caller merges). Slurm takes it only while the job is
    pending: refused while it runs ("Job is no longer pending execution"), taken just after `scontrol requeue`
    (tests/cluster/README.md)."""
    check(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(nodes)}"], runner)


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


def version_argv() -> list[str]:
    """The command that prints the Slurm version (`slurm 22.05.8`): run here or on a remote login node."""
    return ["sinfo", "-V"]


def parse_version(text: str) -> str | None:
    """`22.05.8` from `slurm 22.05.8` (sinfo -V / scontrol --version; Debian's say `slurm-wlm 22.05.8`)."""
    words = text.strip().split()
    return words[1] if len(words) == 2 and words[0] in ("slurm", "slurm-wlm") and words[1][:1].isdigit() else None
