"""StopAgreement: every rank decides to stop on the same step, at ~zero cost per step.

At each call a non-blocking all-reduce(MAX) of this rank's stop flag is launched on a CPU Gloo group; the
one launched by the previous call is waited for first. The previous reduction ran while the step computed, so
the wait is normally already satisfied. Every rank calls `should_stop()` once per step, so every rank sees the
same reduced value at the same call and they stop together: no rank is left waiting in a collective
(submitit#9).
A request noticed during step k is acted on after step k+1 at the latest.
"""

from __future__ import annotations

from types import TracebackType

import torch
import torch.distributed as dist

from ddpctl.runtime import stopflag
from ddpctl.runtime.dist import DistContext, cpu_group


class StopAgreement:
    """Agreed per-step "should we stop?" check.

    Construct it on every rank at the same point (it may create a process group), call `should_stop()` once
    per step on every rank, and `close()` (or use `with`) when the loop ends so the last in-flight reduction
    is drained before the process group is destroyed.
    """

    def __init__(self, ctx: DistContext) -> None:
        self._ctx = ctx
        self._group = cpu_group(ctx.distributed)
        self._pending: dist.Work | None = None
        self._buf = torch.zeros(1, dtype=torch.int32)
        self._stop = False
        self.checks = 0

    def should_stop(self) -> bool:
        """True on the same call on every rank once any rank's stop flag was set; sticky afterwards."""
        if self._stop:
            return True
        self.checks += 1
        if not self._ctx.distributed:
            self._stop = stopflag.stop_requested()
            return self._stop
        if self._pending is not None:
            self._pending.wait()
            self._pending = None
            if int(self._buf.item()) > 0:
                self._stop = True
                return True
        # A fresh tensor each time: the one in flight must not be mutated before its wait().
        self._buf = torch.tensor([1 if stopflag.stop_requested() else 0], dtype=torch.int32)
        self._pending = dist.all_reduce(self._buf, op=dist.ReduceOp.MAX, group=self._group, async_op=True)
        return False

    def close(self) -> None:
        """Wait for the in-flight reduction, if any. Every rank must call it (it completes a collective)."""
        if self._pending is not None:
            self._pending.wait()
            self._pending = None

    def __enter__(self) -> StopAgreement:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # On an exception other ranks may never reach their matching call: waiting could hang until the
        # process-group timeout, and torchrun tears the group down anyway.
        if exc_type is None:
            self.close()
