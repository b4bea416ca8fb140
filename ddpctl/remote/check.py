"""`ddpctl clusters --check`: is each cluster reachable, does it run this ddpctl version, which Slurm, and is
the profile's workdir a directory this user may write there?

Two or three remote commands over the cluster's shared connection (the first one opens it). The verdicts from
their output are pure functions, tested with literal tables; `check_cluster` is the walk through the transport.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace

from ddpctl.errors import DdpctlError
from ddpctl.remote.profiles import Cluster
from ddpctl.remote.ssh import command_missing
from ddpctl.remote.transport import Transport
from ddpctl.sanitize import visible
from ddpctl.slurm.commands import parse_version, version_argv


@dataclass(frozen=True)
class Checked:
    name: str
    destination: str
    ddpctl: str | None = None  # the remote version, when it answered
    slurm: str | None = None
    problem: str | None = None  # one line; None when all is well
    seconds: float = 0.0
    workdir: str | None = None  # the profile's workdir as the cluster resolved it (None: not set, or not reached)


def install_hint(local: str) -> str:
    return f"install ddpctl {local} there (pip install ddpctl=={local}) or set its path as `ddpctl:` in the profile"


def ddpctl_verdict(
    cluster: Cluster, local: str, returncode: int, stdout: str, stderr: str
) -> tuple[str | None, str | None]:
    """(remote version, problem) from `<ddpctl> --version`'s result."""
    install = install_hint(local)
    command = visible(" ".join(cluster.ddpctl))
    if command_missing(returncode, stderr):
        return None, f"cluster {cluster.name!r}: no {command!r} on {visible(cluster.ssh)}: {install}"
    match = re.fullmatch(r"ddpctl (\S+)", stdout.strip())
    if returncode != 0 or not match:
        said = visible((stderr or stdout).strip().splitlines()[-1] if (stderr or stdout).strip() else "no output")
        return None, f"cluster {cluster.name!r}: {command!r} --version failed (exit {returncode}: {said}): {install}"
    remote = visible(match.group(1))
    if remote != local:
        return remote, f"cluster {cluster.name!r}: ddpctl {remote} there, {local} here: {install}"
    return remote, None


def slurm_verdict(cluster: Cluster, returncode: int, stdout: str, stderr: str) -> tuple[str | None, str | None]:
    version = parse_version(stdout) if returncode == 0 else None
    if version is not None:
        return visible(version), None
    if command_missing(returncode, stderr):
        return None, f"cluster {cluster.name!r}: no Slurm commands (sinfo) on {visible(cluster.ssh)}'s PATH"
    said = visible((stderr or stdout).strip().splitlines()[-1] if (stderr or stdout).strip() else "no output")
    return None, f"cluster {cluster.name!r}: sinfo -V failed there (exit {returncode}: {said})"


# Run after the profile's `cd` (ddpctl.remote.ssh.remote_command): the directory it reached, if it may write there.
WORKDIR_PROBE = ("sh", "-c", 'test -w . && pwd || { echo "not writable by $(id -un)" >&2; exit 1; }')


def workdir_verdict(cluster: Cluster, returncode: int, stdout: str, stderr: str) -> tuple[str | None, str | None]:
    """(the directory reached, problem) from WORKDIR_PROBE run in the profile's workdir."""
    reached = stdout.strip().splitlines()
    if returncode == 0 and reached:
        return visible(reached[-1]), None
    said = visible(stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {returncode}")
    return None, f"cluster {cluster.name!r}: workdir {visible(cluster.workdir or '')!r}: {said}"


def check_cluster(cluster: Cluster, transport: Transport, local: str) -> Checked:
    start = time.monotonic()

    def done(ddpctl: str | None = None, slurm: str | None = None, problem: str | None = None) -> Checked:
        return Checked(cluster.name, cluster.ssh, ddpctl, slurm, problem, time.monotonic() - start)

    try:
        answer = transport.run([*cluster.ddpctl, "--version"])
        remote, problem = ddpctl_verdict(cluster, local, answer.returncode, answer.stdout, answer.stderr)
        if problem:
            return done(ddpctl=remote, problem=problem)
        answer = transport.run(version_argv())
        slurm, problem = slurm_verdict(cluster, answer.returncode, answer.stdout, answer.stderr)
        if problem or not cluster.workdir:
            return done(ddpctl=remote, slurm=slurm, problem=problem)
        answer = transport.run(WORKDIR_PROBE, in_workdir=True)
        reached, problem = workdir_verdict(cluster, answer.returncode, answer.stdout, answer.stderr)
        return replace(done(ddpctl=remote, slurm=slurm, problem=problem), workdir=reached)
    except DdpctlError as err:
        return done(problem=str(err))
