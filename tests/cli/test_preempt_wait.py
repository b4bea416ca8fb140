"""`preempt`'s wait for a listener counts down (issue 45, item 8): a minute with one line at its start read as a
hang. A real run dir with no listener in it; the job's state from an injected function (our own seam)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.cli import preempt
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState


def test_the_listener_wait_says_how_long_it_has_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "attempt-0").mkdir()
    record = JobRecord("local-4", "ex", str(tmp_path), "local", 0.0)
    monkeypatch.setattr(preempt, "COUNTDOWN_S", 0.5)
    said: list[str] = []
    preempt.wait_for_listener(record, 1.8, said.append, state_fn=lambda _r: JobState("RUNNING"))
    assert said[0] == "waiting up to 2 s for a rank of job local-4 to listen for stops"
    countdown = said[1:]
    assert countdown and all(line.startswith("still waiting for a rank to listen: ") for line in countdown), said
    assert countdown[-1].endswith(" s left, then the stop is sent")
