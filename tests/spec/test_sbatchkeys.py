"""The first-class sbatch keys' one table (ddpctl.spec.sbatchkeys): each row's key is a JobSpec field, is checked
as the row says, is refused as a raw `sbatch:` option, and reaches the #SBATCH lines and submitit's parameters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.plan.executor import executor_parameters
from ddpctl.plan.render import sbatch_options
from ddpctl.spec import JobSpec, load_spec
from ddpctl.spec.sbatchkeys import SBATCH_KEYS, SbatchKey

ROOT = Path(__file__).resolve().parents[2]
BASE = Path("/project/runs/example")

# key: (value in the spec, its #SBATCH line's value, submitit's keyword and value or None)
EXPECTED = {
    "gpus_per_node": (2, "2", ("gpus_per_node", 2)),
    "cpus_per_task": (6, "6", ("cpus_per_task", 6)),
    "mem": ("64G", "64G", ("mem", "64G")),
    "time": ("01:30:00", "01:30:00", ("time", 90)),  # submitit: minutes
    "partition": ("gpu", "gpu", ("partition", "gpu")),
    "account": ("proj1", "proj1", ("account", "proj1")),
    "qos": ("high", "high", ("qos", "high")),
}


def spec_with(**values: object) -> JobSpec:
    return load_spec(ROOT / "jobs" / "example.yaml", [f"{key}={value}" for key, value in values.items()])


def test_every_row_is_a_field_of_the_spec_and_the_table_is_the_expected_one() -> None:
    fields = {f.name for f in dataclasses.fields(JobSpec)}
    assert [key.key for key in SBATCH_KEYS] == list(EXPECTED)
    assert all(key.key in fields for key in SBATCH_KEYS)


@pytest.mark.parametrize("key", list(EXPECTED))
def test_a_key_reaches_its_sbatch_line_and_submitits_parameter(key: str) -> None:
    value, line, (keyword, param) = EXPECTED[key]
    spec = spec_with(**{key: value, "nproc_per_node": 1})
    row = next(r for r in SBATCH_KEYS if r.key == key)
    assert (row.option, line) in sbatch_options(spec, BASE)
    assert executor_parameters(spec, BASE)[keyword] == param


@pytest.mark.parametrize("key", list(EXPECTED))
def test_a_key_left_out_writes_no_line(key: str) -> None:
    spec = spec_with()
    row = next(r for r in SBATCH_KEYS if r.key == key)
    if row.given(spec) is None:
        assert row.option not in dict(sbatch_options(spec, BASE))


@pytest.mark.parametrize("row", SBATCH_KEYS, ids=[r.key for r in SBATCH_KEYS])
def test_the_raw_option_is_refused_in_favour_of_the_key(row: SbatchKey, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: x\nscript: train.py\nsbatch:\n  {row.option}: '1'\n")
    with pytest.raises(SpecError, match=f"use {row.key}"):
        load_spec(spec, check_paths=False)


@pytest.mark.parametrize(
    ("key", "bad"), [("gpus_per_node", "-1"), ("cpus_per_task", "0"), ("mem", "lots"), ("partition", "a b")]
)
def test_each_row_checks_its_value(key: str, bad: str) -> None:
    with pytest.raises(SpecError, match=key):
        spec_with(**{key: bad})
