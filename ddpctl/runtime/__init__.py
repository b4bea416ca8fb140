"""Training-side helpers for scripts run by `ddpctl launch` (torch is imported only when a name is used).

    ctx = runtime.init()                                   # process group from torchrun's environment
    ckpt = runtime.Checkpointer(ctx=ctx)                   # $DDPCTL_CKPT_DIR, keep $DDPCTL_CKPT_KEEP
    stop = runtime.StopAgreement(ctx)                      # one cheap agreed check per step
    progress = runtime.Progress(0, 0, 0)
    beat = runtime.Heartbeat(total_steps=n, model=ddp_model)  # progress records for status/top/watchdog
    if (found := ckpt.load_latest()) is not None:          # newest complete checkpoint, same on all ranks
        progress = runtime.restore(found[1], model, opt, sampler)
    ...  # after each optimizer step:
    beat.step(step, epoch=epoch, samples=batch_size, loss=loss)   # cheap: the record is written <= 1/s
    if stop.should_stop():                                 # True on the same step on every rank
        path = ckpt.save(step, runtime.capture(model, opt, progress))
        runtime.finish_for_requeue(ctx, step, path)        # marker + event, exit 0

`ddpctl.runtime.stopflag` is torch-free; `ddpctl.node.worker` imports only that.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpctl.runtime.agreement import StopAgreement
    from ddpctl.runtime.checkpoint import RANK_KEY, Checkpointer
    from ddpctl.runtime.dist import DistContext, init
    from ddpctl.runtime.progress import Heartbeat
    from ddpctl.runtime.requeue import finish_for_requeue, write_stopped_marker
    from ddpctl.runtime.resume import (
        Progress,
        ResumableSampler,
        capture,
        capture_rng,
        restore,
        restore_rng,
    )
    from ddpctl.runtime.stopflag import request_stop, stop_requested

_EXPORTS = {
    "StopAgreement": "agreement",
    "RANK_KEY": "checkpoint",
    "Checkpointer": "checkpoint",
    "DistContext": "dist",
    "init": "dist",
    "Heartbeat": "progress",
    "finish_for_requeue": "requeue",
    "write_stopped_marker": "requeue",
    "Progress": "resume",
    "ResumableSampler": "resume",
    "capture": "resume",
    "capture_rng": "resume",
    "restore": "resume",
    "restore_rng": "resume",
    "request_stop": "stopflag",
    "stop_requested": "stopflag",
}

__all__ = [
    "RANK_KEY",
    "Checkpointer",
    "DistContext",
    "Heartbeat",
    "Progress",
    "ResumableSampler",
    "StopAgreement",
    "capture",
    "capture_rng",
    "finish_for_requeue",
    "init",
    "request_stop",
    "restore",
    "restore_rng",
    "stop_requested",
    "write_stopped_marker",
]


def __getattr__(name: str) -> Any:
    # PEP 562: importing ddpctl.runtime (e.g. for stopflag in the worker wrapper) must not import torch.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ddpctl.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ddpctl.runtime.{module}"), name)
