"""The hang watchdog signals only its own torchrun's workers (issue 43): a run-dir file names the pid, and the
job can rewrite it. Real processes and real signals: a stand-in torchrun with one worker, and an unrelated one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ddpctl.health.stacks import DUMP_MARK
from ddpctl.health.summary import JobView, Seat
from ddpctl.health.watchdog import Watchdog
from ddpctl.health.workers import started_by
from ddpctl.run.layout import RunLayout
from ddpctl.spec import HealthSettings

TORCHRUN = "import subprocess, time; w = subprocess.Popen(['sleep', '60']); print(w.pid, flush=True); time.sleep(60)"


@pytest.fixture
def procs() -> Iterator[tuple[subprocess.Popen[str], int, subprocess.Popen[str]]]:
    """(a torchrun, its worker's pid, an unrelated process started by someone else: this test)."""
    torchrun = subprocess.Popen([sys.executable, "-c", TORCHRUN], stdout=subprocess.PIPE, text=True)
    assert torchrun.stdout is not None
    worker = int(torchrun.stdout.readline())
    unrelated = subprocess.Popen(["sleep", "60"], text=True)
    yield torchrun, worker, unrelated
    for child in (torchrun, unrelated):
        child.kill()
        child.wait()


def state(pid: int) -> str:
    """The process's state letter (Z: it died, unreaped), or "gone"."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return text[text.rfind(")") + 2]


def test_only_a_process_torchrun_started_counts_as_its_worker(procs: Any) -> None:
    torchrun, worker, unrelated = procs
    assert started_by(worker, torchrun.pid)
    for pid in (unrelated.pid, torchrun.pid, os.getpid(), os.getppid(), 1, 0, -1, True, "12", None, 1.5, 2**400):
        assert not started_by(pid, torchrun.pid), pid
    assert not started_by(worker, unrelated.pid)  # not its parent
    assert not started_by(worker, -1) and not started_by(worker, 0)


def test_a_hang_signals_the_worker_and_never_a_process_a_rewritten_file_names(tmp_path: Path, procs: Any) -> None:
    torchrun, worker, unrelated = procs
    layout = RunLayout(tmp_path)
    attempt = tmp_path / "attempt-0"
    attempt.mkdir()
    for rank, pid in enumerate((worker, unrelated.pid, torchrun.pid)):
        (attempt / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, "node": "n1", "pid": pid}))
        (attempt / f"rank-{rank}.log").write_text("")
    # Another node found and recorded the hang: this one only dumps its workers and ends its torchrun.
    layout.hang_marker(0).write_text(json.dumps({"node": "n2", "recorded": time.time()}))
    ended: list[bool] = []
    watchdog = Watchdog(
        JobView(Seat(layout, 0, "n1", 0, 2)),
        HealthSettings(),
        end_attempt=lambda: ended.append(True),
        torchrun=torchrun.pid,
    )
    watchdog.on_hang(None, {})
    assert ended == [True]
    assert state(worker) in ("Z", "gone")  # sleep has no handler: the dump signal's default action ended it
    assert DUMP_MARK in (attempt / "rank-0.log").read_text()
    assert unrelated.poll() is None and torchrun.poll() is None  # never signalled
    for rank in (1, 2):
        assert (attempt / f"rank-{rank}.log").read_text() == "", rank
