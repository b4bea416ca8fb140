"""The spec's `mfu:` block: the work per sample and, optionally, the GPU's peak (ddpctl.health.mfu computes).

`flops_per_sample` directly, or for a transformer `params` and `tokens_per_sample` (6 x params x tokens), not
both; `peak_tflops` overrides the table of common GPUs (for a GPU not in it, or another precision).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from ddpctl.spec.fields import Conv, number
from ddpctl.spec.yamldoc import At

if TYPE_CHECKING:
    from ddpctl.spec.model import MfuSettings

# YAML 1.1 (PyYAML) reads 6e12 and 1.5e+9 as strings: these counts are written that way, so such a string is
# taken as the number it spells (only this form; "six" or "0x10" stay errors).
SCIENTIFIC_RE = r"[0-9]+(\.[0-9]*)?[eE][+-]?[0-9]+"
POSITIVE = number(0, above=True)


def big_number(value: Any, at: At) -> float | None:
    """A number > 0, also written 6e12 (see SCIENTIFIC_RE); null: not given."""
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(SCIENTIFIC_RE, value.strip()):
        parsed = float(value)
        if math.isfinite(parsed):
            return float(POSITIVE(parsed, at))
    return float(POSITIVE(value, at))


TABLE: dict[str, Conv] = {
    "flops_per_sample": big_number,
    "params": big_number,
    "tokens_per_sample": big_number,
    "peak_tflops": big_number,
}


def check(block: MfuSettings, at: At) -> None:
    """One way to say the work per sample: `flops_per_sample`, or `params` with `tokens_per_sample`."""
    pair = (block.params, block.tokens_per_sample)
    if block.flops_per_sample is not None and any(v is not None for v in pair):
        key = "params" if block.params is not None else "tokens_per_sample"
        raise at.child(key).error("give either flops_per_sample or params with tokens_per_sample, not both")
    for key, value, other in (("params", pair[0], pair[1]), ("tokens_per_sample", pair[1], pair[0])):
        if value is not None and other is None:
            missing = "tokens_per_sample" if key == "params" else "params"
            raise at.child(missing).error(f"missing, expected a number > 0 ({key} is set: 6 x params x tokens)")
