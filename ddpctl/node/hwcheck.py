"""Built-in hardware checks of the node preflight (`ddpctl.node.checkprog`), needing no vendor tools.

- InfiniBand/RoCE ports, from sysfs (`<sys>/class/infiniband/<dev>/ports/<n>/state`): a port that NCCL_IB_HCA
  names must be `4: ACTIVE`. Without NCCL_IB_HCA every device must have an ACTIVE port, and no port may sit in
  INIT or ARMED (its link is up but the subnet manager never made it active: a fabric fault); a DOWN port beside
  an ACTIVE one on the same device is taken as not cabled (dual-port cards used once are common). No devices, or
  NCCL_IB_DISABLE=1: nothing to check.
- Free space (>= DISK_FLOOR_BYTES) and writability (a temporary file created and deleted) of the run dir and the
  checkpoint dir, each at its nearest existing directory (the checkpoint dir may not exist before a first save).
- GPUs, where `pynvml` (nvidia-ml-py) imports and NVML answers: uncorrectable ECC errors since the driver loaded,
  a pending page retirement or row remapping (the GPU needs a reset), a failed row remapping.

The readers take their root or path (tests give a temporary directory as /sys); the verdicts are pure and say
one line per fault, naming the device, port, path or GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACTIVE = "4: ACTIVE"
# A full disk is the fault caught here: below 1 GiB a checkpoint save, or even the logs, fail partway through a
# run. The floor is not a checkpoint's size (ddpctl does not know it): it finds a full filesystem, not a small one.
DISK_FLOOR_BYTES = 1 << 30
STATE_BYTES = 64  # a sysfs state line ("4: ACTIVE"); never read more


def read_state(path: Path) -> str:
    try:
        with path.open("rb") as file:
            return file.read(STATE_BYTES).decode(errors="replace").strip()
    except OSError:
        return "unreadable"


def ib_ports(sys_root: Path) -> dict[str, dict[str, str]]:
    """device -> port -> state, as sysfs under `sys_root` says (empty: no InfiniBand/RoCE device)."""
    base = sys_root / "class" / "infiniband"
    try:
        devices = sorted(d.name for d in base.iterdir())
    except OSError:
        return {}
    found: dict[str, dict[str, str]] = {}
    for device in devices[:64]:  # bounded: a node has a handful
        try:
            ports = sorted((base / device / "ports").iterdir(), key=lambda p: p.name)[:16]
        except OSError:
            ports = []
        found[device] = {port.name: read_state(port / "state") for port in ports}
    return found


def wanted_ports(hca: str | None) -> tuple[set[str], set[str], bool]:
    """NCCL_IB_HCA's devices (`mlx5_0`) and ports (`mlx5_0:1`): (named, excluded, exact). `^` excludes, `=` asks
    for exact names; without it NCCL matches name prefixes, as this does."""
    text = (hca or "").strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    names = {item.strip() for item in text.lstrip("=").split(",") if item.strip()}
    return (set(), names, exact) if exclude else (names, set(), exact)


def matches(device: str, port: str, names: set[str], exact: bool) -> bool:
    for name in names:
        dev, _, only = name.partition(":")
        if (device == dev or (not exact and device.startswith(dev))) and only in ("", port):
            return True
    return False


def ib_verdict(ports: Mapping[str, Mapping[str, str]], env: Mapping[str, str]) -> list[str]:
    """The faults of the ports (module docstring), one line each."""
    if env.get("NCCL_IB_DISABLE", "").strip() == "1":
        return []
    named, excluded, exact = wanted_ports(env.get("NCCL_IB_HCA"))
    faults = []
    for device, states in ports.items():
        kept = {p: s for p, s in states.items() if not matches(device, p, excluded, exact)}
        if named:
            kept = {p: s for p, s in kept.items() if matches(device, p, named, exact)}
            faults += [f"InfiniBand {device} port {p} is {s!r}, not {ACTIVE!r}" for p, s in kept.items() if s != ACTIVE]
            continue
        if kept and ACTIVE not in kept.values():
            said = ", ".join(f"port {p} {s!r}" for p, s in kept.items())
            faults.append(f"InfiniBand {device} has no active port ({said})")
            continue
        up = [p for p, s in kept.items() if s.endswith(("INIT", "ARMED"))]
        faults += [f"InfiniBand {device} port {p} is {kept[p]!r}: link up, never made active" for p in up]
    return faults


@dataclass(frozen=True)
class Disk:
    path: str  # as the spec's run or checkpoint dir resolves
    probed: str  # the nearest existing directory, where it was measured
    free: int | None  # bytes an unprivileged writer may still use; None: statvfs failed
    write_error: str | None  # why a temporary file could not be created and deleted there


def probe_disk(path: Path) -> Disk:
    where = path
    while not where.is_dir() and where != where.parent:
        where = where.parent
    try:
        stat = os.statvfs(where)
        free: int | None = stat.f_bavail * stat.f_frsize
    except OSError:
        free = None
    error = None
    try:
        fd, name = tempfile.mkstemp(prefix=".ddpctl-check-", dir=where)
        os.close(fd)
        Path(name).unlink()
    except OSError as err:
        error = f"{type(err).__name__}: {err.strerror or err}"
    return Disk(str(path), str(where), free, error)


def disk_verdict(disk: Disk, floor: int = DISK_FLOOR_BYTES) -> list[str]:
    faults = []
    at = disk.path if disk.probed == disk.path else f"{disk.path} (at {disk.probed})"
    if disk.write_error is not None:
        faults.append(f"{at} is not writable: {disk.write_error}")
    if disk.free is not None and disk.free < floor:
        faults.append(f"{at} has {disk.free / (1 << 20):.0f} MiB free, below the {floor / (1 << 30):g} GiB floor")
    return faults


@dataclass(frozen=True)
class GpuHealth:
    index: int
    ecc_uncorrected: int | None = None  # volatile: since the driver loaded; None: not supported or not asked
    retirement_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None


def gpu_verdict(gpus: Sequence[GpuHealth]) -> list[str]:
    faults = []
    for gpu in gpus:
        if gpu.ecc_uncorrected:
            faults.append(f"GPU {gpu.index}: {gpu.ecc_uncorrected} uncorrectable ECC errors since the driver loaded")
        if gpu.remap_failed:
            faults.append(f"GPU {gpu.index}: a row remapping failed (its memory cannot be repaired)")
        elif gpu.retirement_pending or gpu.remap_pending:
            faults.append(f"GPU {gpu.index}: a page retirement or row remapping is pending (the GPU needs a reset)")
    return faults


def nvml_health(visible: str | None) -> list[GpuHealth]:
    """Each GPU's health where pynvml imports and NVML answers; [] otherwise (the torch stage says whether the
    GPUs are there). Untested on CPU CI, which has neither pynvml nor a GPU: the verdict above is what is tested.
    Volatile ECC counts: an aggregate count would fail a GPU for a fault that a reset has since repaired."""
    try:
        nvml: Any = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:  # absent, or no driver: nothing this check can read
        return []
    try:
        return [gpu_health(nvml, index) for index in visible_indices(visible, nvml.nvmlDeviceGetCount())]
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def visible_indices(visible: str | None, count: int) -> list[int]:
    """The GPUs this job was given: CUDA_VISIBLE_DEVICES's indices, or every GPU when it is unset or names UUIDs
    (a neighbour's GPU could be checked then; NVML counts all of the node's)."""
    items = [item.strip() for item in (visible or "").split(",") if item.strip()]
    if visible is None or not all(item.isdigit() for item in items):
        return list(range(count))
    return [int(item) for item in items if int(item) < count]


def gpu_health(nvml: Any, index: int) -> GpuHealth:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def ask(call: str, *args: Any) -> Any:
        try:
            return getattr(nvml, call)(handle, *args)
        except Exception:  # NVMLError_NotSupported on GPUs without ECC or row remapping
            return None

    ecc = ask("nvmlDeviceGetTotalEccErrors", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)
    pending = ask("nvmlDeviceGetRetiredPagesPendingStatus")
    rows = ask("nvmlDeviceGetRemappedRows")  # (corrected, uncorrected, pending, failure)
    return GpuHealth(
        index=index,
        ecc_uncorrected=int(ecc) if ecc is not None else None,
        retirement_pending=bool(pending) if pending is not None else None,
        remap_pending=bool(rows[2]) if rows is not None else None,
        remap_failed=bool(rows[3]) if rows is not None else None,
    )


def hardware_faults(sys_root: Path, disks: Sequence[Path], env: Mapping[str, str], gpus: bool) -> list[str]:
    """Every built-in check's faults on this node; `gpus`: the spec asks for GPUs (NVML is read only then)."""
    faults = ib_verdict(ib_ports(sys_root), env)
    for path in dict.fromkeys(disks):
        faults += disk_verdict(probe_disk(path))
    if gpus:
        faults += gpu_verdict(nvml_health(env.get("CUDA_VISIBLE_DEVICES")))
    return faults
