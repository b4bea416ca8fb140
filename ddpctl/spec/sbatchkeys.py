"""The first-class sbatch keys, one row each: the spec key, how it is checked, the #SBATCH option our template
writes, and the `SlurmExecutor` parameter the submitit backend passes (pure).

A key added here is validated (ddpctl.spec.schema), refused as a raw `sbatch:` option in favour of the key,
rendered (ddpctl.plan.render.sbatch_options) and handed to submitit (ddpctl.plan.executor) without another edit;
the JobSpec field of the same name holds its value (tests/spec/test_sbatchkeys.py holds the two together).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddpctl.spec.fields import MEM_RE, SLURM_NAMES_RE, Conv, integer, slurm_time, text

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec

MAX_PER_NODE = 4096  # GPUs, ranks or CPUs on one node: far above any real node (README "Input limits")


@dataclass(frozen=True)
class SbatchKey:
    key: str  # the spec key, and the JobSpec field that holds it
    option: str  # the #SBATCH long option
    convert: Conv  # its check and conversion (a one-line error naming the key, the value and what is allowed)
    submitit: str | None  # the SlurmExecutor.update_parameters keyword; None: the executor plan spells it itself

    def given(self, spec: JobSpec) -> object | None:
        """The spec's value for the option, None where the spec leaves it to Slurm (gpus_per_node 0: none)."""
        value = getattr(spec, self.key)
        return None if value is None or value == 0 else value


# In the order the template writes them.
SBATCH_KEYS = (
    SbatchKey("gpus_per_node", "gpus-per-node", integer(0, MAX_PER_NODE), "gpus_per_node"),
    SbatchKey("cpus_per_task", "cpus-per-task", integer(1, MAX_PER_NODE, nullable=True), "cpus_per_task"),
    SbatchKey("mem", "mem", text(MEM_RE, nullable=True), "mem"),
    SbatchKey("time", "time", slurm_time, None),  # submitit takes minutes, and always writes one (plan.executor)
    SbatchKey("partition", "partition", text(SLURM_NAMES_RE, nullable=True), "partition"),
    SbatchKey("account", "account", text(SLURM_NAMES_RE, nullable=True), "account"),
    SbatchKey("qos", "qos", text(SLURM_NAMES_RE, nullable=True), "qos"),
)
SBATCH_KEY = {key.key: key for key in SBATCH_KEYS}
