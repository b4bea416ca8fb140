"""The Heartbeat's DDP wait timer: how long this rank waited for the others inside DDP each step, from three
hooks on the DDP module (ddpctl.runtime.progress turns wait time into the record's busy time)."""

from __future__ import annotations

import time
from typing import Any


class CommTimer:
    """Per step, the time this rank spent waiting for the others inside DDP, measured without replacing any of
    DDP's own communication (a Python comm hook would add a copy of every gradient bucket to each step):
    (1) DDP's pre-forward sync (buffer broadcast): from the DDP module's forward pre-hook to the wrapped module's;
    (2) from the moment this rank's last gradient was ready to the step report: the gradient all-reduce wait,
    plus the optimizer step, which costs every rank the same.

    At most three Python hooks a step, whatever the model's size (a hook per parameter cost 4 % of a 3 ms GPU
    step at 144 parameters). The last gradient is taken to be the first trainable parameter's in module order:
    backward reaches the input layer last, and DDP's gradient buckets run in reverse order, so that parameter's
    bucket is the last to start reducing. A parameter used twice (tied embeddings) accumulates once, after both
    uses. Where it got no gradient this step (an unused branch), the wait counts as busy. The forward hooks
    only where DDP broadcasts buffers before each forward.

    None on a GPU: the host runs ahead of the device (kernels and NCCL's reductions are only queued), so a host
    clock cannot see the device's waits, and on a fast GPU loop every microsecond of Python per step shows in
    the step time. There busy time is the step time (README, "Health").
    """

    def __init__(self) -> None:
        self.attached = False
        self._waited = 0.0
        self._entered: float | None = None
        self._ready: float | None = None

    def attach(self, model: Any) -> None:
        first = next((p for p in model.parameters() if p.requires_grad), None)
        if first is None or first.device.type != "cpu":
            return
        self.attached = True
        first.register_post_accumulate_grad_hook(self._grad_ready)
        if getattr(model, "broadcast_buffers", False) and next(model.module.buffers(), None) is not None:
            model.register_forward_pre_hook(self._enter)
            model.module.register_forward_pre_hook(self._synced)

    def _enter(self, _module: Any, _args: Any) -> None:
        self._entered = time.perf_counter()

    def _synced(self, _module: Any, _args: Any) -> None:
        if self._entered is not None:
            self._waited += time.perf_counter() - self._entered
            self._entered = None

    def _grad_ready(self, _param: Any) -> None:
        self._ready = time.perf_counter()

    def take(self, now: float) -> float:
        waited, ready = self._waited, self._ready
        self._waited, self._ready = 0.0, None
        return waited + (now - ready if ready is not None and now > ready else 0.0)
