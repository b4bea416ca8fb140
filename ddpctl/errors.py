"""Every user-facing failure is a DdpctlError; only the CLI catches them and prints one line.

A traceback escaping the CLI therefore always means a bug in ddpctl, never a user mistake.
"""

from __future__ import annotations

from ddpctl.exitcodes import USAGE


class DdpctlError(Exception):
    """Base class: `str(err)` is the complete one-line message shown to the user."""

    exit_code: int = USAGE


class SpecError(DdpctlError):
    """A job spec (file, key or --set override) is invalid."""


class HostlistError(DdpctlError, ValueError):
    """A Slurm hostlist expression is malformed."""


class SlurmEnvError(DdpctlError):
    """SLURM_* variables are missing or inconsistent (e.g. not inside a job step)."""


class CommandError(DdpctlError):
    """An external command (sbatch, squeue, ...) is missing or failed."""

    exit_code = 1


class CommandTimeout(CommandError):
    """An external command did not finish within its bound (a Slurm controller that does not answer)."""


class ControllerUnreachable(CommandError):
    """Slurm's controller did not answer a query: nothing about the job is known from Slurm right now."""


class BackendUnavailable(DdpctlError):
    """The chosen backend cannot run here (no sbatch, submitit not importable)."""


class JobNotFound(DdpctlError):
    """A job id or name is not in the local registry."""


class LogsError(DdpctlError):
    """Bad `ddpctl logs` input (rank outside the world, bad regex, ...)."""


class ArgumentError(DdpctlError, ValueError, TypeError):
    """A Python API argument of the wrong type or out of range (`Job.wait(timeout=nan)`, `ddpctl.job(123)`).

    Also a ValueError and a TypeError, so code that caught what Python raised before keeps working."""


class WaitTimeout(DdpctlError, TimeoutError):
    """`Job.wait(timeout=...)` ran out of time; the job itself keeps running."""

    exit_code = 1


class RemoteError(CommandError):
    """A remote cluster could not be reached or answered wrongly over SSH (one line naming cluster and host)."""

    kind = ""  # ssh's own failure (ddpctl.remote.ssh.Failure.kind): "dropped" is worth asking again
