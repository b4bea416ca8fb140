"""Helpers for tests that run against the local Slurm test cluster (tests/cluster/start.sh).

Import them as ``from slurmtools import wait_for_state, job_info, sbatch_text``; the fixtures
``slurm_cluster`` and ``cleanup_jobs`` come from tests/conftest.py. Tests poll ``squeue`` themselves
(every 0.2 s) instead of ``sbatch --wait``, which polls at 2, 8 and 32 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
START_SCRIPT = REPO_ROOT / "tests" / "cluster" / "start.sh"
STATE_DIR = Path(os.environ.get("DDPCTL_TEST_STATE_DIR", "/var/lib/ddpctl-test-cluster"))
CTLD_LOG = STATE_DIR / "log" / "slurmctld.log"
JOBCOMP_FILE = STATE_DIR / "log" / "jobcomp.txt"
# Where sbatch_text() sends a job's output when the caller does not choose (see job_output()).
JOB_OUTPUT_DIR = STATE_DIR / "jobs"
# Written by start.sh: the Slurm version whose daemons run (version=...) and the dir of its client commands
# (path=..., empty for the host's own 22.05 ones).
ACTIVE_FILE = STATE_DIR / "slurm-active"
SLURM_VERSIONS = ("22.05", "24.11")

POLL_S = 0.2
# States after which a job never runs again (a preempted+requeued job goes back to PENDING instead).
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)
_KEY = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=")


def read_active(text: str) -> dict[str, str]:
    """The key=value lines of start.sh's ACTIVE_FILE."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def target_slurm_version(environ: Mapping[str, str], active_text: str) -> str:
    """The version the session's start.sh call starts: DDPCTL_TEST_SLURM when set, else the one running (so
    `DDPCTL_TEST_SLURM=24.11 bash tests/cluster/start.sh && python -m pytest` stays on 24.11), else 22.05."""
    return environ.get("DDPCTL_TEST_SLURM") or read_active(active_text).get("version") or SLURM_VERSIONS[0]


def client_dir(version: str) -> Path | None:
    """Where start.sh puts the client commands of VERSION (None: the host's own, on PATH already)."""
    return None if version == SLURM_VERSIONS[0] else STATE_DIR / f"bin-{version}"


def _ctld_root() -> str | None:
    """The root directory of the running slurmctld (None: none runs, or it cannot be told)."""
    try:
        pid = int((STATE_DIR / "run" / "slurmctld.pid").read_text().strip())
        return str(Path(f"/proc/{pid}/root").readlink())
    except (OSError, ValueError):
        return None


def use_slurm_version(environ: MutableMapping[str, str]) -> str:
    """Choose the session's Slurm version, export it for start.sh and put its clients first on PATH (for the
    tests and for every ddpctl they start); returns the version."""
    try:
        active = ACTIVE_FILE.read_text()
        if _ctld_root() == "/":  # the host's own slurmctld runs (started by a start.sh that knows no versions)
            active = ""
    except OSError:
        active = ""
    version = target_slurm_version(environ, active)
    environ["DDPCTL_TEST_SLURM"] = version
    others = {str(d) for d in map(client_dir, SLURM_VERSIONS) if d is not None}
    path = [p for p in environ.get("PATH", "").split(os.pathsep) if p and p not in others]
    bindir = client_dir(version)
    environ["PATH"] = os.pathsep.join([str(bindir), *path] if bindir is not None else path)
    return version


class SlurmTestError(AssertionError):
    """A job did not do what the test waited for; the message carries the cluster's view of it."""


@dataclass(frozen=True)
class ClusterInfo:
    """What the ``slurm_cluster`` fixture yields."""

    nodes: tuple[str, ...]
    partitions: tuple[str, ...]
    default_partition: str
    state_dir: Path


def _run(argv: list[str], stdin: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)


def _squeue_state(job_id: str) -> str | None:
    """The job's state per squeue; "" when squeue no longer lists it; None when squeue itself failed."""
    res = _run(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if res.returncode != 0:
        # After MinJobAge the controller forgets the job: squeue then rejects the id.
        return "" if "Invalid job id" in res.stderr else None
    lines = res.stdout.split()
    return lines[0] if lines else ""


def parse_scontrol_line(line: str) -> dict[str, str]:
    """Parse one ``scontrol show ... -o`` line (Key=Value pairs; values may contain spaces)."""
    keys = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for cur, nxt in zip(keys, [*keys[1:], None], strict=True):
        end = nxt.start() if nxt is not None else len(line)
        out[cur.group(1)] = line[cur.end() : end].strip()
    return out


def job_info(job_id: str) -> dict[str, str]:
    """``scontrol show job -o ID`` as a dict (JobState, Restarts, NodeList, ExitCode, ...); {} if unknown."""
    res = _run(["scontrol", "show", "job", "-o", job_id])
    if res.returncode != 0 or not res.stdout.strip():
        return {}
    return parse_scontrol_line(res.stdout.strip().splitlines()[0])


def _jobcomp_state(job_id: str) -> str | None:
    """The job's last recorded final state in the jobcomp/filetxt file, if any."""
    try:
        lines = JOBCOMP_FILE.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        rec = parse_scontrol_line(line)
        if rec.get("JobId") == job_id and "JobState" in rec:
            return rec["JobState"]
    return None


def final_state(job_id: str) -> str:
    """State of a job that left squeue: from scontrol (MinJobAge keeps it), else the jobcomp file."""
    state = job_info(job_id).get("JobState") or _jobcomp_state(job_id) or "UNKNOWN"
    return state.split()[0]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"<{exc}>"


def cluster_dump(job_id: str | None = None) -> str:
    """squeue, sinfo, the job's scontrol record and the slurmctld log tail, for failure messages."""
    parts = []
    cmds = [["squeue", "-o", "%i|%P|%T|%r|%N|%B"], ["sinfo", "-N", "-o", "%N %P %T %E"]]
    if job_id is not None:
        cmds.append(["scontrol", "show", "job", job_id])
    for argv in cmds:
        res = _run(argv)
        parts.append(f"$ {' '.join(argv)}\n{res.stdout}{res.stderr}")
    parts.append(f"--- tail {CTLD_LOG}\n{_tail(CTLD_LOG)}")
    return "\n".join(parts)


def wait_for_state(job_id: str, states: set[str], timeout: float = 60) -> str:
    """Poll squeue every 0.2 s until the job is in one of ``states``; return that state.

    A job that left squeue has finished: its final state (scontrol, else the jobcomp file) is then checked
    against ``states``. Raises SlurmTestError with a dump of the cluster when the job ends in another final
    state or the timeout passes.
    """
    wanted = {s.upper() for s in states}
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while True:
        state = _squeue_state(job_id)
        if state == "":
            state = final_state(job_id)
        if state is not None:
            if not seen or seen[-1] != state:
                seen.append(state)
            if state in wanted:
                return state
            if state in FINAL_STATES:
                raise SlurmTestError(
                    f"job {job_id} ended {state}, waited for {sorted(wanted)}; states seen {seen}\n"
                    + cluster_dump(job_id)
                )
        if time.monotonic() >= deadline:
            raise SlurmTestError(
                f"job {job_id} not in {sorted(wanted)} after {timeout} s; states seen {seen}\n" + cluster_dump(job_id)
            )
        time.sleep(POLL_S)


def job_output_path(job_id: str) -> Path:
    """Where a job submitted by sbatch_text() without -o/--output writes its stdout+stderr."""
    return JOB_OUTPUT_DIR / f"slurm-{job_id}.out"


def job_output(job_id: str) -> str:
    """The output of a job submitted by sbatch_text() without -o/--output ("" if nothing yet)."""
    try:
        return job_output_path(job_id).read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _has_output_option(args: Iterable[str]) -> bool:
    return any(a in ("-o", "--output") or a.startswith(("--output=", "-o")) for a in args)


def sbatch_text(script: str, *args: str) -> str:
    """Submit ``script`` (text; a ``#!/bin/bash`` line is added if it has none) with ``sbatch --parsable``.

    ``args`` are extra sbatch options (e.g. ``"-N2"``, ``"--partition=urgent"``). Without -o/--output the
    output goes to job_output_path(id). The job inherits this process's environment and working directory.
    Returns the job id.
    """
    if not script.startswith("#!"):
        script = "#!/bin/bash\n" + script
    argv = ["sbatch", "--parsable", *args]
    if not _has_output_option(args):
        JOB_OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        argv.append(f"--output={JOB_OUTPUT_DIR}/slurm-%j.out")
    res = _run(argv, stdin=script)
    if res.returncode != 0:
        raise SlurmTestError(f"sbatch {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout.strip().split(";")[0]


def scancel_and_wait(job_ids: Iterable[str], timeout: float = 30) -> None:
    """Cancel jobs and wait until squeue no longer lists them (so their nodes are free for the next test)."""
    ids = [j for j in job_ids if j]
    if not ids:
        return
    _run(["scancel", *ids])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = _run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i"])
        if res.returncode == 0 and not res.stdout.strip():
            return
        if res.returncode != 0 and "Invalid job id" in res.stderr:
            return
        time.sleep(POLL_S)
