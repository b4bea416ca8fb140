"""The spec's `mfu:` block: one line naming the key, the value and what is allowed; counts written 6e12."""

from __future__ import annotations

from typing import Any

import pytest

from ddpctl.errors import SpecError
from ddpctl.spec import MfuSettings, spec_from_mapping, spec_to_mapping

BASE = {"name": "n", "script": "train.py", "backend": "local"}


def mfu(block: Any) -> MfuSettings:
    return spec_from_mapping({**BASE, "mfu": block}, check_paths=False).mfu


@pytest.mark.parametrize(
    ("block", "flops", "peak"),
    [
        ({"flops_per_sample": 6e12}, 6e12, None),
        ({"flops_per_sample": "6e12"}, 6e12, None),  # PyYAML reads 6e12 as a string
        ({"params": "7e9", "tokens_per_sample": 2048, "peak_tflops": 400}, 6 * 7e9 * 2048, 400.0),
        ({"peak_tflops": 312}, None, 312.0),
        ({}, None, None),
        ({"flops_per_sample": None, "peak_tflops": None}, None, None),  # null: not given
    ],
)
def test_good_blocks(block: dict[str, Any], flops: float | None, peak: float | None) -> None:
    got = mfu(block)
    assert (got.flops, got.peak_tflops) == (flops, peak)
    spec = spec_from_mapping({**BASE, "mfu": block}, check_paths=False)
    assert spec_from_mapping(spec_to_mapping(spec), check_paths=False).mfu == got


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"flops_per_sample": 0}, "mfu.flops_per_sample: got 0, expected a number > 0"),
        ({"flops_per_sample": -5}, "mfu.flops_per_sample: got -5, expected a number > 0"),
        ({"flops_per_sample": "1e999"}, "mfu.flops_per_sample: got '1e999' (a string), expected a number > 0"),
        ({"flops_per_sample": "lots"}, "mfu.flops_per_sample: got 'lots' (a string), expected a number > 0"),
        ({"peak_tflops": True}, "mfu.peak_tflops: got true (a boolean), expected a number > 0"),
        ({"params": 7e9}, "mfu.tokens_per_sample: missing, expected a number > 0 (params is set"),
        ({"params": 7e9, "tokens_per_sample": None}, "mfu.tokens_per_sample: missing"),
        ({"tokens_per_sample": 8}, "mfu.params: missing, expected a number > 0 (tokens_per_sample is set"),
        ({"flops_per_sample": 1.0, "params": 2.0}, "mfu.params: give either flops_per_sample or params with"),
        ({"flop": 1}, "mfu.flop: unknown key"),
        ([1], "mfu: got [1] (a list), expected a mapping with keys flops_per_sample"),
    ],
)
def test_bad_blocks_get_one_line(block: Any, message: str) -> None:
    with pytest.raises(SpecError) as err:
        mfu(block)
    assert message in str(err.value) and "\n" not in str(err.value)
