"""The submitit backend's half of the plan: `SlurmExecutor.update_parameters()` keywords for a spec (pure).

The same sbatch options as our own template (`render.sbatch_options`), expressed the way submitit takes them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ddpctl.plan.render import shell_quote
from ddpctl.run.layout import slurm_output
from ddpctl.spec import JobSpec, time_to_seconds
from ddpctl.spec.sbatchkeys import SBATCH_KEYS


def executor_parameters(spec: JobSpec, run_base: Path) -> dict[str, Any]:
    """SlurmExecutor.update_parameters() keywords for the spec (pure)."""
    sig, lead = spec.requeue.signal, spec.requeue.lead_s
    extra: dict[str, Any] = {
        **dict(spec.sbatch),
        "hold": True,
        "open-mode": "append",
        "signal": f"{sig}@{lead}",
        "output": slurm_output(run_base),
        "requeue" if spec.requeue.enabled else "no-requeue": True,
    }
    seconds = time_to_seconds(spec.time) if spec.time else None
    exports = [*spec.env, ("SUBMITIT_PREEMPT_SIGNAL", sig)]  # the signal submitit's handler listens to
    params: dict[str, Any] = {
        "job_name": spec.name,
        "nodes": spec.nodes,
        "ntasks_per_node": 1,
        "signal_delay_s": lead,
        "stderr_to_stdout": True,
        "additional_parameters": extra,
        "setup": [*spec.setup, *(f"export {name}={shell_quote(value)}" for name, value in exports)],
        # submitit always writes --time, in minutes (5 by default); 0 is Slurm's "no limit" (UNLIMITED).
        "time": math.ceil(seconds / 60) if seconds else 0,
    }
    given = {key.submitit: key.given(spec) for key in SBATCH_KEYS if key.submitit}
    params.update({name: value for name, value in given.items() if value is not None})
    return params
