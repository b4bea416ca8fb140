"""Process-group setup from the torchrun environment, and the few collectives the runtime needs.

Every collective the runtime makes for its own bookkeeping (stop agreement, stop marker, checkpoint owner and
commit, resume candidates, barriers) goes over one Gloo control group of CPU tensors. The default group carries
only the user's tensors: on NCCL it has no CPU backend at all ("No backend type associated with device type
cpu"), and an NCCL barrier guesses a device and can hang when the rank-to-GPU mapping is unusual.
`$DDPCTL_PG_BACKEND=cuda:gloo` opens the default group exactly that way on a CPU-only machine, the lane in
which the tests prove it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import HashStore  # torch.distributed re-exports it without marking it public

from ddpctl.run import envvars
from ddpctl.runtime import stopflag

DEFAULT_PG_TIMEOUT_S = 1800
_CPU_GROUP: list[dist.ProcessGroup] = []  # one shared control group per process group lifetime


@dataclass(frozen=True)
class DistContext:
    """Who this process is. `distributed` is False for a plain single-process run (a group of one)."""

    rank: int
    local_rank: int
    world_size: int
    device: torch.device
    attempt: int
    distributed: bool

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        """Collective: every rank waits for the others, over the Gloo control group (never NCCL's)."""
        if self.distributed:
            dist.barrier(group=cpu_group(True))

    def close(self) -> None:
        """Destroy the process group (collective; safe to call twice)."""
        if dist.is_initialized():
            self.barrier()  # no rank tears its connections down while a peer still uses them
            dist.destroy_process_group()
        _CPU_GROUP.clear()


def init(backend: str | None = None, env: Mapping[str, str] | None = None) -> DistContext:
    """Initialise distributed training from torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*).

    NCCL when CUDA is available, Gloo otherwise, unless `backend` (else `$DDPCTL_PG_BACKEND`) says; the Gloo
    control group for the runtime's own collectives is made here too, at a point every rank reaches. The
    timeout comes from `$DDPCTL_PG_TIMEOUT_S` (default 1800 s). On CUDA the device is pinned to LOCAL_RANK.
    Without torchrun's variables this is a single process: world size 1, a process group of one (so DDP
    works) and `distributed=False` (the runtime skips its collectives). Also arms the stop flag from the
    launcher's variables if `ddpctl.node.worker` did not already (a script started by plain torchrun).
    """
    env = os.environ if env is None else env
    stopflag.watch_from_env(env)
    rank = int(env.get("RANK", "0"))
    local_rank = int(env.get("LOCAL_RANK", "0"))
    world_size = int(env.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    distributed = "MASTER_ADDR" in env and "RANK" in env
    if not dist.is_initialized():
        timeout = timedelta(seconds=float(env.get(envvars.PG_TIMEOUT_S, str(DEFAULT_PG_TIMEOUT_S))))
        chosen = backend or env.get(envvars.PG_BACKEND) or ("nccl" if cuda else "gloo")
        # Alone (plain `python train.py`): a group of one over an in-process store, so DDP(model) still works.
        store = None if distributed else HashStore()
        dist.init_process_group(chosen, timeout=timeout, rank=rank, world_size=world_size, store=store)
    cpu_group(distributed)
    attempt = int(env.get(envvars.ATTEMPT, "0"))
    return DistContext(rank, local_rank, world_size, device, attempt, distributed)


def all_reduce_max(value: float, distributed: bool, group: dist.ProcessGroup | None = None) -> float:
    """Blocking MAX over ranks of one CPU float (a no-op when not distributed), on `group` or else the control
    group: a CPU tensor on the default group would fail on NCCL."""
    if not distributed:
        return value
    buf = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(buf, op=dist.ReduceOp.MAX, group=group or cpu_group(True))
    return float(buf.item())


def all_reduce_min(value: float, distributed: bool, group: dist.ProcessGroup | None = None) -> float:
    """Blocking MIN over ranks of one CPU float (a no-op when not distributed)."""
    return -all_reduce_max(-value, distributed, group)


def cpu_group(distributed: bool) -> dist.ProcessGroup | None:
    """A separate Gloo group for small CPU control messages, so they never queue behind DDP's gradient
    all-reduces or force a host-device sync on NCCL. Collective: every rank calls it at the same point.
    """
    if not distributed:
        return None
    if _CPU_GROUP:
        return _CPU_GROUP[0]
    group = dist.new_group(backend="gloo")
    if not isinstance(group, dist.ProcessGroup):
        return None
    _CPU_GROUP.append(group)
    return group
