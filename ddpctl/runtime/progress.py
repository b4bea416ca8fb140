"""Heartbeat: each rank's progress, written to the run dir at most once a second (torch-free unless `model=`).

    beat = runtime.Heartbeat(total_steps=n, model=ddp_model)   # once, after building the DDP model
    beat.step(step, epoch=epoch, samples=batch_size, loss=loss)   # after each optimizer step: the one line

Per call `step()` only reads the clock and appends to two short deques; the record
`<run dir>/attempt-<n>/progress-<rank>.json` is rewritten (tmp file + rename, so readers never see half of
one) only when `every_s` has passed since the last write, on a phase change, and at `close()`. `status`,
`logs`, `top`, the hang watchdog and `scale` read these files from the shared run dir, never the nodes.

With `model=` (a DistributedDataParallel module) hooks time how long this rank waited for the others inside
DDP each step (the pre-forward sync, and from its last gradient to the step report). DDP makes every rank's
step take the same wall time (the fast ones wait for the slow one inside DDP), so the step time alone cannot
show a straggler; the time *not* spent waiting ("busy") can. Without a DDP model, busy time is the step time.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run import envvars
from ddpctl.run.layout import RunLayout

HISTORY = 120  # (t, step, samples) points kept in the record, one per write: ~2 minutes at 1 write/s
_ACTIVE: list[Heartbeat] = []  # the process's heartbeat, so the Checkpointer can flag its saves


class Heartbeat:
    def __init__(
        self,
        total_steps: int | None = None,
        *,
        model: Any = None,
        every_s: float = 1.0,
        window: int = 20,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.rank = int(env.get("RANK", "0"))
        self.total_steps = total_steps
        self.every_s = every_s
        run_dir, attempt = env.get(envvars.RUN_DIR), int(env.get(envvars.ATTEMPT, "0"))
        self.path = RunLayout(Path(run_dir)).progress_file(attempt, self.rank) if run_dir else None
        self.base = {
            "rank": self.rank,
            "node": env.get(envvars.NODE_NAME, "?"),
            "pid": os.getpid(),
            "attempt": attempt,
            "total_steps": total_steps,
        }
        self.step_times: deque[float] = deque(maxlen=window)
        self.busy_times: deque[float] = deque(maxlen=window)
        self.history: deque[list[float]] = deque(maxlen=HISTORY)
        self.current: dict[str, Any] = {"step": None, "epoch": None, "samples": 0, "t": None}
        self.values: dict[str, Any] = {}
        self.phase_name = "start"
        self.started = time.time()
        self._last = time.perf_counter()
        self._next_write = 0.0
        self._comm = _CommTimer()
        if model is not None:
            self._comm.attach(model)
        _ACTIVE[:] = [self]
        self._write()

    def step(self, step: int, *, epoch: int | None = None, samples: int = 0, **values: Any) -> None:
        """Report that optimizer step `step` finished (`samples`: this rank's samples in that step)."""
        now = time.perf_counter()
        interval, self._last = now - self._last, now
        self.step_times.append(interval)
        self.busy_times.append(max(0.0, interval - self._comm.take(now)))
        cur = self.current
        cur["step"], cur["epoch"], cur["samples"] = step, epoch, cur["samples"] + samples
        cur["t"] = time.time()
        if values:
            self.values = values  # converted to float only when written: loss.item() would sync a GPU
        if now >= self._next_write or self.phase_name != "train":
            self.phase_name = "train"
            self._write()

    def phase(self, name: str) -> None:
        """Mark a phase the watchdog allows extra time for ("checkpoint"), or "done"; written at once."""
        self.phase_name = name
        self._write()

    def close(self) -> None:
        self.phase("done")
        if _ACTIVE and _ACTIVE[0] is self:
            _ACTIVE.clear()

    def _write(self) -> None:
        self._next_write = time.perf_counter() + self.every_s
        if self.path is None:
            return
        now = time.time()
        if self.current["step"] is not None:
            self.history.append([round(now, 3), self.current["step"], self.current["samples"]])
        record = {
            **self.base,
            **self.current,
            "phase": self.phase_name,
            "written": round(now, 3),
            "started": round(self.started, 3),
            "step_s": _median(self.step_times),
            "busy_s": _median(self.busy_times),
            "window": len(self.step_times),
            "values": {k: _number(v) for k, v in self.values.items()},
            "history": list(self.history),
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            safeio.write_text_atomic(self.path, json.dumps(record))
        except OSError:
            pass  # progress is advisory: a full or flaky filesystem must never stop training


def mark(phase: str) -> None:
    """Flag a phase on the process's heartbeat, if there is one (the Checkpointer calls this)."""
    if _ACTIVE:
        _ACTIVE[0].phase(phase)


class _CommTimer:
    """Per step, the time this rank spent waiting for the others inside DDP, measured without replacing any of
    DDP's own communication (a Python comm hook would add a copy of every gradient bucket to each step):
    (1) DDP's pre-forward sync (buffer broadcast): from the DDP module's forward pre-hook to the wrapped module's;
    (2) from the moment this rank's last gradient was ready (post-accumulate-grad hooks) to the step report:
    the gradient all-reduce wait, plus the optimizer step, which costs every rank the same.
    """

    def __init__(self) -> None:
        self._waited = 0.0
        self._entered: float | None = None
        self._ready: float | None = None

    def attach(self, model: Any) -> None:
        model.register_forward_pre_hook(self._enter)
        model.module.register_forward_pre_hook(self._synced)
        for param in model.parameters():
            if param.requires_grad:
                param.register_post_accumulate_grad_hook(self._grad_ready)

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


def _median(values: deque[float]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def _number(value: Any) -> float | str:
    try:
        return round(float(value), 6)
    except (TypeError, ValueError):
        return str(value)[:80]
