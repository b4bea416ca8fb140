"""Where each rank stopped, from the faulthandler dump in its log, and which ranks stopped first (pure).

A dump (faulthandler, all threads) looks like
    Thread 0x00007f2a1c9ff640 (most recent call first):
      File "/x/site-packages/torch/distributed/...", line 12 in wait
    <blank>
    Current thread 0x00007f2a2d1b4740 (most recent call first):
      File "/job/train.py", line 150 in inject_delays
      File "/job/train.py", line 160 in after_step
The main thread (its id is in the worker's rank-<r>.json) is what the training loop runs on; its innermost
frame is where the rank is. A rank inside torch is waiting for the others (a collective); a rank elsewhere
(user code: a sleep, a lock, I/O) is the one they wait for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DUMP_MARK = "[ddpctl.health] hang:"  # the watchdog writes this line into each rank log just before the dump
_HEADER = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (.*)$')
TORCH_PARTS = ("/torch/", "/torch\\")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.func}"

    @property
    def in_torch(self) -> bool:
        return any(part in self.file for part in TORCH_PARTS)


def parse_dump(text: str) -> dict[int, list[Frame]]:
    """thread id -> frames, innermost first, from the last dump after the last DUMP_MARK in `text`."""
    start = text.rfind(DUMP_MARK)
    threads: dict[int, list[Frame]] = {}
    current: list[Frame] | None = None
    for line in text[start if start >= 0 else 0 :].splitlines():
        if header := _HEADER.match(line):
            current = threads.setdefault(int(header.group(1), 16), [])
            current.clear()
        elif current is not None and (frame := _FRAME.match(line)):
            current.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3)))
        elif not line.strip():
            current = None
    return threads


def main_frames(threads: Mapping[int, list[Frame]], main_thread: int | None) -> list[Frame]:
    if main_thread is not None and main_thread in threads:
        return threads[main_thread]
    # No id recorded: the thread whose stack goes deepest is the training loop's.
    return max(threads.values(), key=len, default=[])


def where(frames: list[Frame]) -> str:
    return str(frames[0]) if frames else "no stack dumped"


@dataclass(frozen=True)
class RankState:
    rank: int
    node: str
    step: int | None
    frames: tuple[Frame, ...]
    silent_s: float | None = None  # its heartbeat stopped writing this long ago: process frozen, node cut off


def culprits(states: list[RankState]) -> list[RankState]:
    """The ranks that stopped progressing first. Ranks whose heartbeat went silent (their process, or their
    node, stopped answering: the others only wait for them) come first; else the lowest step, and among those
    the ones not waiting in torch (when every one of them is in torch, all of them: the dumps cannot tell)."""
    if not states:
        return []
    silent = [s for s in states if s.silent_s is not None]
    if silent:
        return silent
    steps = [s.step for s in states if s.step is not None]
    lowest = min(steps) if steps else None
    behind = [s for s in states if s.step == lowest or s.step is None]
    outside = [s for s in behind if s.frames and not s.frames[0].in_torch]
    return outside or behind


def node_findings(states: list[RankState]) -> list[dict[str, Any]]:
    """Per node with a problem: the ranks that went silent and the ranks whose stacks could not be dumped."""
    out = []
    for node in sorted({s.node for s in states}):
        mine = [s for s in states if s.node == node]
        silent = [s.rank for s in mine if s.silent_s is not None]
        undumped = [s.rank for s in mine if not s.frames]
        if silent or undumped:
            ages = [s.silent_s for s in mine if s.silent_s is not None]
            out.append({"node": node, "silent": silent, "silent_s": max(ages, default=None), "undumped": undumped})
    return out
