"""Each backend's capabilities, declared once (ddpctl.spec.capabilities): the literal table, and what the spec's
checks and the plan read from it."""

from __future__ import annotations

import pytest

from ddpctl.errors import SpecError
from ddpctl.plan.submission import build
from ddpctl.spec import JobSpec, spec_from_mapping
from ddpctl.spec.capabilities import BACKENDS, EXECUTOR, NOTHING, SCRIPT, SLURM_BACKENDS


def test_the_table() -> None:
    rows = {
        name: (c.slurm, c.submits, c.chain, c.own_attempts, c.containers, c.loopback, c.python_module)
        for name, c in BACKENDS.items()
    }
    assert rows == {
        "sbatch": (True, SCRIPT, True, False, True, False, None),
        "submitit": (True, EXECUTOR, False, False, False, False, "submitit"),
        "local": (False, NOTHING, True, True, False, True, None),
    }
    assert SLURM_BACKENDS == ("sbatch", "submitit")
    assert [JobSpec(name="x", script="t.py", backend=n).capabilities.name for n in BACKENDS] == list(BACKENDS)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_the_plan_hands_over_what_the_backend_submits(backend: str) -> None:
    plan = build(JobSpec(name="x", script="t.py", nodes=2, backend=backend))
    handed = SCRIPT if plan.script is not None else EXECUTOR if plan.executor_json is not None else NOTHING
    assert handed == BACKENDS[backend].submits and plan.capabilities == BACKENDS[backend]
    assert ("on loopback" in plan.text()) == BACKENDS[backend].loopback


@pytest.mark.parametrize("backend", [n for n, c in BACKENDS.items() if not c.containers])
def test_containers_only_where_the_backend_runs_them(backend: str) -> None:
    box = {"runtime": "apptainer", "image": "/images/train.sif"}
    mapping = {"name": "x", "script": "t.py", "backend": backend, "container": box}
    with pytest.raises(SpecError, match=f"containers run with backend sbatch only \\(backend is {backend}\\)"):
        spec_from_mapping(mapping, "jobs/x.yaml")
