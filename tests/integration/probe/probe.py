"""A torch-free rank for the production-cluster tests: records what the rank was given (CPUs, GPUs, cgroups)
as one RESULT line; optionally eats memory to be OOM-killed."""

from __future__ import annotations

import argparse
import errno
import json
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
GPU_DEVICES = Path("/dev/ddpctl-gpu")


def job_cpuset() -> list[int] | None:
    """The CPUs of this job on this node: the cpuset of the job_<id> cgroup above this step's (task/cgroup)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuset" in controllers.split(",") and "/job_" in path:
            job = path[: path.index("/", path.index("/job_") + 1)] if "/step_" in path else path
            text = (CGROUP / "cpuset" / job.lstrip("/") / "cpuset.cpus").read_text().strip()
            return expand(text)
    return None


def expand(text: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def device_access() -> dict[str, str]:
    """Opening each fake GPU: ENXIO means the devices cgroup allows it (no driver behind it), EPERM that it
    denies it."""
    found = {}
    for dev in sorted(GPU_DEVICES.glob("nvidia*")):
        try:
            os.close(os.open(dev, os.O_RDONLY))
            found[dev.name] = "open"
        except OSError as err:
            found[dev.name] = errno.errorcode.get(err.errno or 0, str(err.errno))
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--eat-mb", type=int, default=0)
    parser.add_argument("--eat-rank", type=int, default=-1)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    result = {
        "rank": rank,
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "node": os.environ.get("SLURMD_NODENAME"),
        "affinity": sorted(os.sched_getaffinity(0)),
        "job_cpus": job_cpuset(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "step_gpus": os.environ.get("SLURM_STEP_GPUS"),
        "devices": device_access(),
    }
    print("RESULT " + json.dumps(result), flush=True)
    if rank == args.eat_rank:
        chunks = [bytearray(b"x" * (1 << 20)) for _ in range(args.eat_mb)]  # touched: really resident
        print(f"ate {len(chunks)} MiB", flush=True)


if __name__ == "__main__":
    main()
