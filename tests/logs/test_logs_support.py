"""Helpers for the `ddpctl logs` tests: real writer processes, run dirs, a follower in a thread.

(No tests here; named test_logs_* only because the logs tests own that prefix.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ddpctl.logs.core import Source
from ddpctl.logs.failures import ErrorHit
from ddpctl.logs.follow import FollowConfig
from ddpctl.logs.show import LogsRequest, show_logs
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState

# Appends COUNT lines "<tag> <seq> xxx… é" to PATH, each line cut into random pieces written separately, so
# a reader often finds half a line (sometimes half a UTF-8 character) at the end of the file.
WRITER = r"""
import os, random, sys, time
path, tag, count, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(count):
    data = f"{tag} {i:06d} {'x' * rng.randrange(0, 120)} é\n".encode()
    while data:
        cut = rng.randrange(1, len(data) + 1)
        os.write(fd, data[:cut])
        data = data[cut:]
        if rng.random() < 0.02:
            time.sleep(0.001)
os.close(fd)
"""

FAST = FollowConfig(fast=0.01, slow=0.1, state_every=0.05, rescan_every=0.3)
# Both ways of waiting: inotify wake-ups (local filesystems) and plain polling (NFS, Lustre, ...).
MODES = {"inotify": FAST, "polling": replace(FAST, notify=False)}


def start_writer(path: Path, tag: str, count: int, seed: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(count), str(seed)])


def expected_lines(tag: str, count: int, seed: int) -> list[str]:
    """What WRITER writes, regenerated with the same seed."""
    import random

    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    lines = []
    for i in range(count):
        lines.append(f"{tag} {i:06d} {'x' * rng.randrange(0, 120)} é")
        data_len = len(lines[-1].encode()) + 1
        while data_len:  # replay the same random calls as the writer
            cut = rng.randrange(1, data_len + 1)
            data_len -= cut
            rng.random()
    return lines


def make_attempt(run_dir: Path, attempt: int, nodes: dict[str, list[int]]) -> Path:
    path = run_dir / f"attempt-{attempt}"
    path.mkdir(parents=True, exist_ok=True)
    for k, (name, ranks) in enumerate(nodes.items()):
        (path / f"node-{k}.json").write_text(json.dumps({"node": name, "node_rank": k, "ranks": ranks}))
    return path


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


class Recorder:
    """A sink that keeps what it got, with the time it got it (a Sink, like the real ones)."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, Source | None, str]] = []

    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None:
        now = time.monotonic()
        self.rows.extend((now, source, line) for line in lines)

    def note(self, text: str) -> None:
        self.rows.append((time.monotonic(), None, text))

    def failure(self, source: Source, hit: ErrorHit) -> None:
        self.rows.append((time.monotonic(), source, hit.text))

    def flush(self) -> None:
        pass

    def texts(self, rank: int | None = None, attempt: int | None = None) -> list[str]:
        return [
            text
            for _, src, text in list(self.rows)
            if src is not None and rank in (None, src.rank) and attempt in (None, src.attempt)
        ]

    def notes(self) -> list[str]:
        return [text for _, src, text in list(self.rows) if src is None]

    def wait_for(self, predicate: Callable[[Recorder], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            assert time.monotonic() < deadline, f"timed out; got {self.rows[-5:]}"
            time.sleep(0.01)


class JobStateSwitch:
    """The injected state query: RUNNING until `end` is called; counts the queries."""

    def __init__(self, state: str = "RUNNING") -> None:
        self.state = state
        self.calls = 0

    def __call__(self, record: JobRecord) -> JobState:
        self.calls += 1
        return JobState(self.state)

    def end(self, state: str = "COMPLETED") -> None:
        self.state = state


class FollowThread(threading.Thread):
    """`show_logs(..., follow=True)` in a thread, as `ddpctl logs -f` runs it."""

    def __init__(
        self,
        run_dir: Path,
        sink: Recorder,
        states: JobStateSwitch,
        request: LogsRequest | None = None,
        config: FollowConfig = FAST,
    ) -> None:
        super().__init__(daemon=True)
        self.record = JobRecord("123", "job", str(run_dir), "local", 0.0)
        self.sink, self.states, self.config = sink, states, config
        self.request = request or LogsRequest(follow=True)
        self.result: JobState | None = None

    def run(self) -> None:
        self.result = show_logs(self.record, self.request, self.sink, state_fn=self.states, config=self.config)

    def finish(self, state: str = "COMPLETED", timeout: float = 20.0) -> JobState | None:
        self.states.end(state)
        self.join(timeout)
        assert not self.is_alive(), "follower did not stop after the job ended"
        return self.result
