"""Heartbeat: each rank's progress, written to the run dir at most once a second (torch-free unless `model=`).

    beat = runtime.Heartbeat(total_steps=n, model=ddp_model)   # once, after building the DDP model
    beat.step(step, epoch=epoch, samples=batch_size, loss=loss)   # after each optimizer step: the one line
    with beat.pause("eval"):                                       # a declared pause (evaluation, reshuffle)
        evaluate()

Per call `step()` only reads the clock, appends to two short deques and swaps one tuple, without a lock (each is
one step under the GIL; the numbers are converted when written, a few microseconds a step on the host whatever the
model's size: on a GPU the host is the bottleneck); the record
`<run dir>/attempt-<n>/progress-<rank>.json` is rewritten (tmp file + rename, so readers never see half of
one) at most once per `every_s`, on a phase change, and at `close()`. A flusher thread writes the newest state
when a step is followed by silence (else the last steps before a pause or a hang would never reach the file, and
the hang report would name an older step), and rewrites an idle record every PULSE_S: a fresh `written` says the
process is alive, a stale one that it (or its node) went silent. `status`, `logs`, `top`, the hang watchdog and
`scale` read these files from the shared run dir, never the nodes. Progress is advisory: nothing here raises
into training (numpy or tensor numbers, huge values, a full filesystem).

With `model=` (a DistributedDataParallel module) hooks time how long this rank waited for the others inside
DDP each step (the pre-forward sync, and from its last gradient to the step report). DDP makes every rank's
step take the same wall time (the fast ones wait for the slow one inside DDP), so the step time alone cannot
show a straggler; the time *not* spent waiting ("busy") can. Without a DDP model, busy time is the step time.
"""

from __future__ import annotations

import json
import math
import operator
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.run import envvars
from ddpctl.run.layout import RunLayout
from ddpctl.runtime.commtimer import CommTimer
from ddpctl.runtime.device import gpu_name
from ddpctl.runtime.flightrec import Answerer
from ddpctl.runtime.series import Series

HISTORY = 120  # (t, step, samples) points kept in the record, one per write: ~2 minutes at 1 write/s
MAX_EXTREMES = 64  # named values whose lowest and highest the record keeps
PULSE_S = 5.0  # an idle record is rewritten this often (health.records.SILENT_S judges a stale one)
_ACTIVE: list[Heartbeat] = []  # the process's heartbeat, so the Checkpointer can flag its saves
_BIG = 1 << 62  # a samples count beyond it is converted (and bounded) the slow way


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
        self.total_steps = _int(total_steps)
        self.every_s = every_s
        run_dir, attempt = env.get(envvars.RUN_DIR), int(env.get(envvars.ATTEMPT, "0"))
        layout = RunLayout(Path(run_dir)) if run_dir else None
        self.path = layout.progress_file(attempt, self.rank) if layout else None
        self.series = Series(layout.series_file(attempt, self.rank) if layout else None)
        self.recorder = _recorder(layout, attempt, self.rank)
        self.base = _identity(env, self.rank, attempt, self.total_steps)
        self.step_times: deque[float] = deque(maxlen=window)
        self.busy_times: deque[float] = deque(maxlen=window)
        self.history: deque[list[float]] = deque(maxlen=HISTORY)
        self.current: dict[str, Any] = {"step": None, "epoch": None, "samples": 0, "t": None}  # as last written
        self.values: dict[str, Any] = {}
        # The newest step as reported, raw: (perf_counter, step, epoch, values); one tuple, swapped in one assignment,
        # so the flusher thread never reads half of a step. `_samples` has one writer (the training thread).
        self._latest: tuple[float | None, Any, Any, dict[str, Any]] = (None, None, None, {})
        self._samples = 0
        # Each named value's lowest and highest as written (sampled at each write, not every step): the best a
        # sweep's results report (`ddpctl sweep results`); at most MAX_EXTREMES names.
        self.extremes: dict[str, list[float]] = {}
        self.phase_name = "start"
        self.pause_info: dict[str, Any] | None = None  # the declared pause in progress
        self.resumed: float | None = None  # when the last declared pause ended
        self.started = time.time()
        self._last = time.perf_counter()
        self._next_write = 0.0
        self._written_at = 0.0
        self._dirty = False
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._comm = CommTimer()
        if model is not None:
            self._comm.attach(model)
        _ACTIVE[:] = [self]
        self._write()
        if self.path is not None:
            threading.Thread(target=self._flusher, name="ddpctl-heartbeat", daemon=True).start()

    def step(self, step: Any, *, epoch: Any = None, samples: Any = 0, **values: Any) -> None:
        """Report that optimizer step `step` finished (`samples`: this rank's samples in that step).

        Never raises: numpy and tensor numbers are converted; a value that is not a number is skipped."""
        now = time.perf_counter()
        interval, self._last = now - self._last, now
        self.step_times.append(interval)
        self.busy_times.append(max(0.0, interval - self._comm.take(now)) if self._comm.attached else interval)
        self._samples += samples if type(samples) is int and -_BIG < samples < _BIG else _int(samples) or 0
        # Converted to numbers only when written (loss.item() would sync a GPU; a step's budget is microseconds).
        self._latest = (now, step, epoch, values or self._latest[3])
        self._dirty = True
        if now >= self._next_write or self.phase_name != "train":
            with self._lock:
                self.phase_name, self.pause_info = "train", None
            self._write()

    def phase(self, name: str, *, allowance_s: float | None = None) -> None:
        """Mark a phase, written at once: "checkpoint" (the watchdog adds health.checkpoint_s), "done", or any
        other name as a declared pause until the next step: the watchdog adds `allowance_s` (default
        health.pause_s) to its allowance, as for a checkpoint save."""
        with self._lock:
            self.phase_name = str(name)
            known = name in ("start", "train", "checkpoint", "done")
            self.pause_info = None if known else {"name": str(name)[:80], "since": round(time.time(), 3)}
            if self.pause_info is not None and _positive(allowance_s) is not None:
                self.pause_info["allowance_s"] = _positive(allowance_s)
        self._write()

    @contextmanager
    def pause(self, name: str = "pause", *, allowance_s: float | None = None) -> Iterator[None]:
        """`with beat.pause("eval"):` declares a normal pause (evaluation, epoch-end work, a reshuffle) on this
        rank; its end counts as progress, so the ranks that waited for it get their usual allowance again."""
        self.phase(name, allowance_s=allowance_s)
        try:
            yield
        finally:
            with self._lock:
                self.phase_name, self.pause_info, self.resumed = "train", None, time.time()
            self._write()

    def close(self) -> None:
        self._closed.set()
        self.phase("done")
        if _ACTIVE and _ACTIVE[0] is self:
            _ACTIVE.clear()

    def _flusher(self) -> None:
        """Writes a step followed by silence once `every_s` passed, and an idle record every PULSE_S; answers the
        hang watchdog's request for the flight recorder (the main thread may be blocked in a collective)."""
        while not self._closed.wait(min(self.every_s, PULSE_S) / 2):
            if self.recorder is not None:
                self.recorder.poll()
            now = time.perf_counter()
            if (self._dirty and now >= self._next_write) or now - self._written_at >= PULSE_S:
                self._write()

    def _write(self) -> None:
        try:
            with self._lock:  # one writer at a time: the flusher never replaces a newer record with an older one
                record = self._record()
                if record is not None:
                    self._store(record)
            if record is not None:
                self.series.add(record)  # outside the lock: a step never waits for the series' file
        except Exception:  # noqa: S110 - progress is advisory: nothing about it may stop training
            pass

    def _record(self) -> dict[str, Any] | None:
        self._next_write = self._written_at = time.perf_counter()
        self._next_write += self.every_s
        self._dirty = False
        if self.path is None:
            return None
        now = time.time()
        self._take_latest(now)
        if self.base["gpu"] is None:  # CUDA set up after the heartbeat was made: asked once a write (cheap)
            self.base["gpu"] = gpu_name()
        point = [round(now, 3), self.current["step"], self.current["samples"]]
        if self.current["step"] is not None and (not self.history or self.history[-1][1:] != point[1:]):
            self.history.append(point)
        return {
            **self.base,
            **self.current,
            "phase": self.phase_name,
            "pause": self.pause_info,
            "resumed": self.resumed,
            "written": round(now, 3),
            "started": round(self.started, 3),
            "step_s": _median(tuple(self.step_times)),  # a copy in one C call: step() appends without the lock
            "busy_s": _median(tuple(self.busy_times)),
            "window": len(self.step_times),
            "values": (values := {str(k)[:80]: _number(v) for k, v in self.values.items()}),
            "extremes": self._extremes(values),
            "history": list(self.history),
        }

    def _take_latest(self, now: float) -> None:
        """The newest step, as `step()` left it raw, into `current` and `values` (under the lock)."""
        at, step, epoch, values = self._latest
        if at is None:
            return
        samples = _int(self._samples)
        wall = now - (time.perf_counter() - at)
        self.current = {"step": _int(step), "epoch": _int(epoch), "samples": samples or 0, "t": wall}
        self.values = values

    def _extremes(self, values: dict[str, float | str]) -> dict[str, list[float]]:
        for name, value in values.items():
            if isinstance(value, float) and (name in self.extremes or len(self.extremes) < MAX_EXTREMES):
                low, high = self.extremes.get(name, (value, value))
                self.extremes[name] = [min(low, value), max(high, value)]
        return dict(self.extremes)

    def _store(self, record: dict[str, Any]) -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            safeio.write_text_atomic(self.path, json.dumps(record, allow_nan=False))
        except OSError:
            pass  # progress is advisory: a full or flaky filesystem must never stop training


def _recorder(layout: RunLayout | None, attempt: int, rank: int) -> Answerer | None:
    """On a hang the watchdog asks for the flight recorder's dump, which only this process can read."""
    return Answerer(layout.flight_record(attempt), layout.flight_record(attempt, rank), rank) if layout else None


def _identity(env: Mapping[str, str], rank: int, attempt: int, total_steps: int | None) -> dict[str, Any]:
    """The record's fields that never change in this process."""
    return {
        "rank": rank,
        "node": env.get(envvars.NODE_NAME, "?"),
        "pid": os.getpid(),
        "attempt": attempt,
        "total_steps": total_steps,
        "gpu": gpu_name(),  # for MFU (ddpctl.health.mfu); None on CPU
    }


def mark(phase: str) -> None:
    """Flag a phase on the process's heartbeat, if there is one (the Checkpointer calls this)."""
    if _ACTIVE:
        _ACTIVE[0].phase(phase)


def _median(values: tuple[float, ...]) -> float | None:
    return round(statistics.median(values), 6) if values else None


def _number(value: Any) -> float | str:
    """A named value as a JSON number; anything else (huge, NaN, not a number) as a short string."""
    try:
        number = float(value)
    except Exception:  # a tensor with many elements, an object whose __float__ raises
        return _text(value)
    return round(number, 6) if math.isfinite(number) else str(number)


def _text(value: Any) -> str:
    try:
        return str(value)[:80]
    except Exception:
        return "?"


def _int(value: Any) -> int | None:
    """A step/epoch/samples count as a plain int (numpy, a one-element tensor); None when it is none, or beyond
    64 bits (json.dumps of a huge int can raise, and no reader would take it)."""
    if value is None:
        return None
    try:
        number: int | float = operator.index(value)
    except Exception:
        try:
            number = float(value)
        except Exception:
            return None
    if isinstance(number, float) and not math.isfinite(number):
        return None
    return int(number) if abs(number) < 2**63 else None


def _positive(value: Any) -> float | None:
    try:
        number = float(value)
    except Exception:
        return None
    return number if math.isfinite(number) and number > 0 else None
