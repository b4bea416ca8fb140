"""MFU (ddpctl.health.mfu): the peak table, the transformer helper and every "unknown" with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpctl.health import mfu
from ddpctl.health.report import collect, text_lines
from ddpctl.run.layout import RunLayout
from ddpctl.spec import MfuSettings


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA H200 NVL", 835.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
        ("Tesla V100-SXM2-32GB", 125.0),
        ("Tesla V100-PCIE-16GB", 112.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L40", 181.0),
        ("NVIDIA A10", 125.0),
        ("NVIDIA A10G", None),  # not A10: unknown, never A10's figure
        ("NVIDIA L4", 121.0),
        ("Tesla T4", 65.0),
        ("NVIDIA GeForce RTX 4090", None),
        ("", None),
    ],
)
def test_peak_table(name: str, peak: float | None) -> None:
    assert mfu.peak_tflops(name) == peak


def test_transformer_flops_is_six_n_tokens() -> None:
    assert mfu.transformer_flops(7e9, 2048) == 6 * 7e9 * 2048
    assert MfuSettings(params=7e9, tokens_per_sample=2048).flops == 6 * 7e9 * 2048
    assert MfuSettings(flops_per_sample=5.0).flops == 5.0


H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    ("samples", "flops", "gpus", "override", "expected"),
    [
        # 8 H100s at 989 TFLOP/s; 100 samples/s x 3.956e13 FLOPs = 3.956e15 of 7.912e15: 50 %
        (100.0, 3.956e13, [H100] * 8, None, (0.5, "100.0 samples/s on 8 GPU(s) x 989 TFLOP/s")),
        (100.0, 3.956e13, [H100] * 8, 494.5, (1.0, "peak from mfu.peak_tflops")),
        (10.0, 1e12, ["NVIDIA GeForce RTX 4090"], 100.0, (0.1, "peak from mfu.peak_tflops")),
        (100.0, None, [H100], None, (None, "no mfu.flops_per_sample")),
        (100.0, 1e12, [], None, (None, "no rank has reported yet")),
        (100.0, 1e12, [None, None], None, (None, "without CUDA (CPU)")),
        (100.0, 1e12, [H100, None], None, (None, "without CUDA (CPU)")),
        (100.0, 1e12, ["NVIDIA GeForce RTX 4090"], None, (None, "'NVIDIA GeForce RTX 4090' is not in the peak table")),
        (100.0, 1e12, [H100, "NVIDIA A100-SXM4-80GB"], None, (None, "different peaks")),
        (None, 1e12, [H100], None, (None, "no current throughput")),
    ],
)
def test_estimate(
    samples: float | None,
    flops: float | None,
    gpus: list[str | None],
    override: float | None,
    expected: tuple[float | None, str],
) -> None:
    value, why = expected
    found = mfu.estimate(samples, flops, gpus, override)
    assert found.value == (pytest.approx(value) if value is not None else None)
    assert why in found.why
    assert found.text().startswith("MFU unknown: " if value is None else "MFU ")


def test_of_records_reads_each_ranks_gpu_and_says_why_when_it_cannot() -> None:
    records = {0: {"gpu": H100}, 1: {"gpu": H100}}
    found = mfu.of_records(records, 10.0, MfuSettings(flops_per_sample=989e12 / 10))
    assert found.value == pytest.approx(0.5)
    cpu = mfu.of_records({0: {"gpu": None}, 1: {}}, 10.0, MfuSettings(flops_per_sample=1.0))
    assert cpu.value is None and "CPU" in cpu.why
    assert "spec could not be read" in mfu.of_records(records, 10.0, None).why
    crafted = mfu.of_records({0: {"gpu": 7}}, 10.0, MfuSettings(flops_per_sample=1.0))
    assert crafted.value is None


def _run_dir(tmp_path: Path, block: str, gpu: str | None) -> Path:
    """One attempt of two ranks, each 10 samples/s over the last 30 s, on `gpu` (None: CPU), spec block `block`."""
    layout = RunLayout(tmp_path / "run")
    layout.attempt_dir(0).mkdir(parents=True)
    layout.spec_file.write_text(f"name: m\nscript: train.py\n{block}")
    history = [[NOW - 30 + i, 100 + i, 10.0 * (100 + i)] for i in range(31)]
    for rank in (0, 1):
        record = {"rank": rank, "node": "n0", "step": 130, "t": NOW, "started": NOW - 600, "step_s": 0.1,
                  "phase": "train", "history": history, "gpu": gpu}  # fmt: skip
        layout.progress_file(0, rank).write_text(json.dumps(record))
    return layout.root


NOW = 50_000.0


def test_status_gives_mfu_where_known_and_why_not_elsewhere(tmp_path: Path) -> None:
    # 20 samples/s x 2.4725e13 FLOPs = 4.945e14 over 2 x 989e12: 25 %
    report = collect(_run_dir(tmp_path / "a", "mfu:\n  flops_per_sample: 2.4725e+13\n", H100), True, NOW)
    assert report["mfu"]["value"] == pytest.approx(0.25), report
    assert "  MFU 25.0% (20.0 samples/s on 2 GPU(s) x 989 TFLOP/s" in "\n".join(text_lines(report))
    cpu = collect(_run_dir(tmp_path / "b", "mfu:\n  flops_per_sample: 6e12\n", None), True, NOW)
    assert "  MFU unknown: a rank ran without CUDA (CPU)" in "\n".join(text_lines(cpu))
    silent = collect(_run_dir(tmp_path / "c", "", H100), True, NOW)
    assert silent["mfu"]["value"] is None and "MFU" not in "\n".join(text_lines(silent))  # no mfu: block


class _Cuda:
    def __init__(self, ready: bool) -> None:
        self.ready = ready

    def is_initialized(self) -> bool:
        return self.ready

    def current_device(self) -> int:
        return 0

    def get_device_name(self, index: int) -> str:
        return f"NVIDIA H200 #{index}"


def test_the_gpu_name_is_asked_only_of_cuda_already_in_use() -> None:
    """runtime.device never imports torch nor starts CUDA: it asks a torch the script imported, once CUDA is set up."""
    import sys
    import types

    from ddpctl.runtime.device import gpu_name

    saved = sys.modules.get("torch")
    try:
        sys.modules["torch"] = types.SimpleNamespace(cuda=_Cuda(False))  # type: ignore[assignment]
        assert gpu_name() is None
        sys.modules["torch"] = types.SimpleNamespace(cuda=_Cuda(True))  # type: ignore[assignment]
        assert gpu_name() == "NVIDIA H200 #0" and mfu.peak_tflops("NVIDIA H200 #0") == 989.0
    finally:
        if saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = saved
