"""runtime.Heartbeat: the progress record it leaves in the run dir, rate-limited, with phases."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ddpctl.run import envvars
from ddpctl.runtime import progress
from ddpctl.runtime.progress import Heartbeat


def env_for(run_dir: Path, rank: int = 3) -> dict[str, str]:
    return {envvars.RUN_DIR: str(run_dir), envvars.ATTEMPT: "2", "RANK": str(rank), envvars.NODE_NAME: "n7"}


def record(run_dir: Path, rank: int = 3) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((run_dir / "attempt-2" / f"progress-{rank}.json").read_text())
    return found


def test_record_is_written_at_start_then_at_most_once_per_interval(tmp_path: Path) -> None:
    beat = Heartbeat(total_steps=100, every_s=3600, env=env_for(tmp_path))
    first = record(tmp_path)
    fields = (first["rank"], first["node"], first["attempt"], first["step"], first["phase"])
    assert fields == (3, "n7", 2, None, "start")
    beat.step(1, epoch=0, samples=8, loss=2.5)  # the phase changes start -> train: written at once
    assert (record(tmp_path)["step"], record(tmp_path)["values"]) == (1, {"loss": 2.5})
    for step in range(2, 50):
        beat.step(step, epoch=0, samples=8)
    assert record(tmp_path)["step"] == 1, "rewritten before every_s passed"
    beat.close()
    final = record(tmp_path)
    assert (final["step"], final["samples"], final["phase"], final["total_steps"]) == (49, 49 * 8, "done", 100)
    assert final["window"] == 20 and final["step_s"] is not None and final["busy_s"] <= final["step_s"] + 1e-6
    assert [point[1] for point in final["history"]] == [1, 49]
    assert not list((tmp_path / "attempt-2").glob(".*tmp")), "temporary file left behind"


def test_rewrites_after_the_interval(tmp_path: Path) -> None:
    beat = Heartbeat(every_s=0.05, env=env_for(tmp_path, rank=0))
    beat.step(1)
    time.sleep(0.1)
    beat.step(2)
    assert record(tmp_path, 0)["step"] == 2


def test_mark_flags_the_checkpoint_phase_and_the_next_step_clears_it(tmp_path: Path) -> None:
    beat = Heartbeat(every_s=3600, env=env_for(tmp_path))
    beat.step(1)
    progress.mark("checkpoint")
    assert record(tmp_path)["phase"] == "checkpoint"
    beat.step(2)
    assert (record(tmp_path)["phase"], record(tmp_path)["step"]) == ("train", 2)


def test_without_a_run_dir_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    beat = Heartbeat(env={})
    beat.step(1, samples=4)
    beat.close()
    assert list(tmp_path.iterdir()) == []
