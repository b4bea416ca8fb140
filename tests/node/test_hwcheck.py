"""The preflight's built-in hardware checks (issue 46 item 5): InfiniBand port states from a temporary /sys, the
run and checkpoint dirs' space and writability, the GPU verdict on literal NVML readings (NVML itself is not
on CPU CI)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ddpctl.node import hwcheck
from ddpctl.node.hwcheck import Disk, GpuHealth

ACTIVE, DOWN, INIT = "4: ACTIVE", "1: DOWN", "2: INIT"


def fake_sys(tmp_path: Path, ports: dict[str, dict[str, str]]) -> Path:
    for device, states in ports.items():
        for port, state in states.items():
            path = tmp_path / "class" / "infiniband" / device / "ports" / port / "state"
            path.parent.mkdir(parents=True)
            path.write_text(state + "\n")
    return tmp_path


def test_port_states_are_read_from_the_given_sys_root(tmp_path: Path) -> None:
    root = fake_sys(tmp_path, {"mlx5_1": {"1": DOWN}, "mlx5_0": {"2": INIT, "1": ACTIVE}})
    assert hwcheck.ib_ports(root) == {"mlx5_0": {"1": ACTIVE, "2": INIT}, "mlx5_1": {"1": DOWN}}
    assert hwcheck.ib_ports(tmp_path / "no-such-sys") == {}  # no InfiniBand/RoCE device: nothing to check


@pytest.mark.parametrize(
    ("ports", "env", "expected"),
    [
        ({}, {}, []),
        ({"mlx5_0": {"1": ACTIVE}}, {}, []),
        ({"mlx5_0": {"1": ACTIVE, "2": DOWN}}, {}, []),  # a dual-port card cabled once
        (
            {"mlx5_0": {"1": DOWN}},
            {},
            ["InfiniBand mlx5_0 has no active port (port 1 '1: DOWN')"],
        ),
        (
            {"mlx5_0": {"1": ACTIVE, "2": INIT}},
            {},
            ["InfiniBand mlx5_0 port 2 is '2: INIT': link up, never made active"],
        ),
        ({"mlx5_0": {"1": DOWN}}, {"NCCL_IB_DISABLE": "1"}, []),
        # NCCL_IB_HCA names what training uses: each named port must be active, the rest are not looked at.
        (
            {"mlx5_0": {"1": ACTIVE, "2": DOWN}, "mlx5_1": {"1": DOWN}},
            {"NCCL_IB_HCA": "mlx5_0:2"},
            ["InfiniBand mlx5_0 port 2 is '1: DOWN', not '4: ACTIVE'"],
        ),
        ({"mlx5_0": {"1": ACTIVE}, "mlx5_1": {"1": DOWN}}, {"NCCL_IB_HCA": "mlx5_0"}, []),
        ({"mlx5_0": {"1": ACTIVE}, "mlx5_10": {"1": DOWN}}, {"NCCL_IB_HCA": "=mlx5_0"}, []),
        (
            {"mlx5_0": {"1": ACTIVE}, "mlx5_10": {"1": DOWN}},
            {"NCCL_IB_HCA": "mlx5_1"},  # a prefix, as NCCL reads it
            ["InfiniBand mlx5_10 port 1 is '1: DOWN', not '4: ACTIVE'"],
        ),
        ({"mlx5_0": {"1": ACTIVE}, "mlx5_1": {"1": DOWN}}, {"NCCL_IB_HCA": "^mlx5_1"}, []),
    ],
)
def test_port_verdicts(ports: dict[str, dict[str, str]], env: dict[str, str], expected: list[str]) -> None:
    assert hwcheck.ib_verdict(ports, env) == expected


GIB = 1 << 30


@pytest.mark.parametrize(
    ("disk", "expected"),
    [
        (Disk("/runs", "/runs", 5 * GIB, None), []),
        (Disk("/runs", "/runs", GIB, None), []),
        (Disk("/runs", "/runs", None, None), []),  # statvfs failed: the write test speaks for it
        (Disk("/ck", "/ck", 200 << 20, None), ["/ck has 200 MiB free, below the 1 GiB floor"]),
        (
            Disk("/ck/new", "/ck", 0, "OSError: No space left on device"),
            [
                "/ck/new (at /ck) is not writable: OSError: No space left on device",
                "/ck/new (at /ck) has 0 MiB free, below the 1 GiB floor",
            ],
        ),
    ],
)
def test_disk_verdicts(disk: Disk, expected: list[str]) -> None:
    assert hwcheck.disk_verdict(disk) == expected


def test_a_disk_is_measured_at_its_nearest_existing_directory(tmp_path: Path) -> None:
    disk = hwcheck.probe_disk(tmp_path / "checkpoints" / "not-yet")
    assert (disk.probed, disk.write_error) == (str(tmp_path), None)
    assert disk.free is not None and disk.free > 0
    assert list(tmp_path.iterdir()) == []  # the probe's file is gone
    assert hwcheck.probe_disk(Path("/proc/self")).write_error is not None


PENDING = "a page retirement or row remapping is pending (the GPU needs a reset)"
FAILED = "a row remapping failed (its memory cannot be repaired)"


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        ([GpuHealth(0), GpuHealth(1, 0, False, False, False)], []),  # None: NVML cannot say (no ECC): no fault
        ([GpuHealth(0, 0), GpuHealth(1, 3)], ["GPU 1: 3 uncorrectable ECC errors since the driver loaded"]),
        ([GpuHealth(2, retirement_pending=True)], [f"GPU 2: {PENDING}"]),
        ([GpuHealth(0, remap_pending=True, remap_failed=True)], [f"GPU 0: {FAILED}"]),
    ],
)
def test_gpu_verdicts(gpus: list[GpuHealth], expected: list[str]) -> None:
    assert hwcheck.gpu_verdict(gpus) == expected


@pytest.mark.parametrize(
    ("visible", "count", "expected"),
    [(None, 2, [0, 1]), ("1", 4, [1]), ("0,3,9", 4, [0, 3]), ("GPU-1234,GPU-5678", 2, [0, 1]), ("", 2, [])],
)
def test_the_gpus_checked_are_the_jobs(visible: str | None, count: int, expected: list[int]) -> None:
    assert hwcheck.visible_indices(visible, count) == expected


def test_without_pynvml_no_gpu_is_read(tmp_path: Path) -> None:
    if importlib.util.find_spec("pynvml") is None:
        assert hwcheck.nvml_health(None) == []
    faults = hwcheck.hardware_faults(fake_sys(tmp_path / "sys", {}), [tmp_path], {}, gpus=True)
    assert faults == [] or all(f.startswith("GPU") for f in faults)
