"""What each backend can do, declared once: the one table of backend names and their capabilities.

Code outside backends/ asks a capability (`spec.capabilities.chain`), never the backend's name
(tests/test_architecture.py checks it). The table lives here, low in the flow, because the spec's checks and
plan/ decide from it and may not import backends/ (which builds on plan/); each backend module exposes its own
row as `CAPABILITIES`, and a test holds the two together. The backend list is this table's keys: the backends'
modules (`backends.MODULES`) and every command's --backend choices read it. A new backend is a row here, a
module in backends/ and, if it submits a script, a template.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddpctl.record import Record

SCRIPT, EXECUTOR, NOTHING = "script", "executor", "nothing"  # what a plan hands its backend besides the run dir
ARRAY, QUEUE = "array", "queue"  # how it runs a sweep: one Slurm job array, or a detached queue on this machine


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class Capabilities(Record):
    """One backend's row of the table below."""

    name: str
    slurm: bool  # its jobs are Slurm jobs: Slurm's tools, partitions and cluster facts apply; squeue knows them
    submits: str  # SCRIPT (the rendered batch script), EXECUTOR (submitit's parameters) or NOTHING
    chain: bool  # can continue a run in a chained successor job (requeue.mode: chain)
    own_attempts: bool  # starts every attempt itself, not through Slurm: requeue and chain are the same thing
    containers: bool  # container.runtime: the batch script starts the launcher in the image
    loopback: bool  # its nodes are processes on this machine, on loopback: the planned node names are the real ones
    spare_nodes: bool  # a failed attempt restarts inside the job (spare_nodes; none needed where own_attempts)
    python_module: str | None = None  # a module it needs on the submitting host (doctor checks it imports)
    sweeps: str = ""  # ARRAY, QUEUE, or "": it runs no sweeps (yet)
    job_ids: str = r"\d+"  # the regex its job ids match (a sweep's task is `<job id>_<index>`: ddpctl.run.sweeps)
    module: str = ""  # its module under ddpctl.backends, where not its name (backends.MODULES reads it)


BACKENDS: dict[str, Capabilities] = {
    caps.name: caps
    for caps in (
        Capabilities(
            "sbatch",
            True,
            SCRIPT,
            chain=True,
            own_attempts=False,
            containers=True,
            loopback=False,
            spare_nodes=True,
            sweeps=ARRAY,
            module="slurm.sbatch",
        ),
        Capabilities(
            "submitit",
            True,
            EXECUTOR,
            chain=False,
            own_attempts=False,
            containers=False,
            loopback=False,
            spare_nodes=False,
            python_module="submitit",
            module="slurm.submitit",
        ),
        Capabilities(
            "local",
            False,
            NOTHING,
            chain=True,
            own_attempts=True,
            containers=False,
            loopback=True,
            spare_nodes=True,
            sweeps=QUEUE,
            job_ids=r"local-\d+",  # its run dir's name, local-7 (ddpctl.backends.local)
        ),
    )
}
SLURM_BACKENDS = tuple(name for name, caps in BACKENDS.items() if caps.slurm)  # squeue and scontrol know their jobs


def of(name: str) -> Capabilities:
    """The backend's capabilities; KeyError for a name the spec's check would have refused."""
    return BACKENDS[name]


def with_spares() -> str:
    """The backends that take spare_nodes, for messages."""
    return ", ".join(name for name, caps in BACKENDS.items() if caps.spare_nodes)


def with_containers() -> str:
    """The backends that run containers, for messages ("sbatch")."""
    return ", ".join(name for name, caps in BACKENDS.items() if caps.containers)
