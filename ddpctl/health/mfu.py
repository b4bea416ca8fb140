"""Model FLOPs utilization (pure): MFU = samples/s x flops_per_sample / (GPUs x the GPU's peak FLOP/s).

The work per sample is the spec's `mfu.flops_per_sample`, or for a transformer `mfu.params` and
`mfu.tokens_per_sample`: 6 x params x tokens (`transformer_flops`: forward 2 N per token, backward twice that;
attention's own FLOPs are left out, as in Kaplan et al. 2020 and the PaLM paper's MFU). The peak is the spec's
`mfu.peak_tflops`, else PEAK_TFLOPS for the GPU the ranks reported (`runtime.Heartbeat` writes
torch.cuda.get_device_name into its record when CUDA is in use). Without either the answer is "unknown" with the
reason, never a made-up figure: on CPU, for a GPU not in the table, or before there is a throughput.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ddpctl.spec import MfuSettings

# Dense (no sparsity) BF16 tensor-core peaks in TFLOP/s, from NVIDIA's datasheets (the figures "with sparsity"
# halved): A100 (40/80 GB, SXM and PCIe) 312; H100 SXM 989, H100 PCIe 756, H100 NVL 835; H200 (SXM) 989,
# H200 NVL 835; L40S 362; L40 181; A40 150; A10 125; L4 121. V100 and T4 have no BF16: their FP16 tensor-core
# peaks (V100 SXM2 125, V100 PCIe 112, T4 65). The first pattern that matches the device name wins, so the more
# specific ones (H100 NVL before H100) come first. A name matching none is unknown: set `mfu.peak_tflops`.
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    (r"\bH200 NVL\b", 835.0),
    (r"\bH200\b", 989.0),
    (r"\bH100 NVL\b", 835.0),
    (r"\bH100 PCIe\b", 756.0),
    (r"\bH100\b", 989.0),
    (r"\bA100\b", 312.0),
    (r"\bV100.*PCIE", 112.0),
    (r"\bV100\b", 125.0),
    (r"\bL40S\b", 362.0),
    (r"\bL40\b", 181.0),
    (r"\bA40\b", 150.0),
    (r"\bA10\b", 125.0),
    (r"\bL4\b", 121.0),
    (r"\bT4\b", 65.0),
)


def transformer_flops(params: float, tokens_per_sample: float) -> float:
    """Training FLOPs per sample of a dense transformer: 6 x params x tokens (see the module docstring)."""
    return 6.0 * params * tokens_per_sample


def peak_tflops(gpu_name: str) -> float | None:
    """The table's peak for a device name as torch reports it (`NVIDIA H100 80GB HBM3`), or None."""
    for pattern, peak in PEAK_TFLOPS:
        if re.search(pattern, gpu_name, re.IGNORECASE):
            return peak
    return None


@dataclass(frozen=True)
class Mfu:
    value: float | None  # a fraction (0.42 = 42 %), None when unknown
    why: str  # how it was found, or why it is unknown

    def text(self) -> str:
        return f"MFU {self.value * 100:.1f}% ({self.why})" if self.value is not None else f"MFU unknown: {self.why}"

    def as_json(self) -> dict[str, float | str | None]:
        return {"value": None if self.value is None else round(self.value, 4), "why": self.why}


def _peak(names: list[str | None], override: float | None) -> tuple[float, str] | Mfu:
    """One GPU's peak and where it came from, or the unknown MFU saying why there is none."""
    if override is not None:
        return override, "peak from mfu.peak_tflops"
    found = {name: peak_tflops(name) for name in names if name is not None}
    if unknown := sorted(name for name, peak in found.items() if peak is None):
        return Mfu(None, f"GPU {unknown[0][:60]!r} is not in the peak table; set mfu.peak_tflops")
    peaks = {peak for peak in found.values() if peak is not None}
    if len(peaks) != 1:
        return Mfu(None, "the ranks ran on GPUs of different peaks; set mfu.peak_tflops")
    return peaks.pop(), f"the table's dense BF16 peak of {next(iter(found))[:60]}"


def estimate(
    samples_per_s: float | None,
    flops_per_sample: float | None,
    gpus: Iterable[str | None],
    peak_override: float | None = None,
) -> Mfu:
    """MFU from the job's throughput (all ranks), the work per sample and the GPU each rank reported (None: a
    rank on CPU or one that did not say); `peak_override` is the spec's `mfu.peak_tflops`."""
    names = list(gpus)
    if flops_per_sample is None:
        return Mfu(None, "no mfu.flops_per_sample (or mfu.params and mfu.tokens_per_sample) in the spec")
    if not names:
        return Mfu(None, "no rank has reported yet")
    if any(name is None for name in names):
        return Mfu(None, "a rank ran without CUDA (CPU), or did not say which GPU it uses")
    known = _peak(names, peak_override)
    if isinstance(known, Mfu):
        return known
    peak, source = known
    if samples_per_s is None:
        return Mfu(None, "no current throughput (samples/s): pass samples= to beat.step")
    value = samples_per_s * flops_per_sample / (len(names) * peak * 1e12)
    return Mfu(value, f"{samples_per_s:.1f} samples/s on {len(names)} GPU(s) x {peak:g} TFLOP/s, {source}")


def of_records(records: Mapping[int, Mapping[str, Any]], samples_per_s: float | None, spec: MfuSettings | None) -> Mfu:
    """MFU of an attempt from its ranks' progress records (each names its GPU, or None on CPU) and the spec's
    `mfu:` block (None: the spec could not be read)."""
    if spec is None:
        return Mfu(None, "the run's spec could not be read")
    gpus = [r.get("gpu") if isinstance(r.get("gpu"), str) else None for r in records.values()]
    return estimate(samples_per_s, spec.flops, gpus, spec.peak_tflops)
