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


def test_a_step_followed_by_silence_is_written_by_the_flusher(tmp_path: Path) -> None:
    """The last steps before a pause or a hang reach the file without a next step() call."""
    beat = Heartbeat(every_s=0.2, env=env_for(tmp_path))
    beat.step(1)
    for step in range(2, 11):
        beat.step(step)  # all within every_s: none of them written inline
    assert record(tmp_path)["step"] == 1
    time.sleep(0.6)
    assert record(tmp_path)["step"] == 10
    beat.close()


def test_an_idle_record_is_rewritten_every_pulse(tmp_path: Path) -> None:
    beat = Heartbeat(every_s=0.2, env=env_for(tmp_path))
    beat.step(1)
    first = record(tmp_path)["written"]
    time.sleep(progress.PULSE_S + 0.5)
    again = record(tmp_path)
    assert again["written"] > first and again["step"] == 1 and [p[1] for p in again["history"]] == [1]
    beat.close()


def test_a_declared_pause_is_recorded_with_its_allowance_and_its_end_counts(tmp_path: Path) -> None:
    beat = Heartbeat(every_s=3600, env=env_for(tmp_path))
    beat.step(1)
    with beat.pause("eval", allowance_s=42):
        inside = record(tmp_path)
        assert (inside["phase"], inside["pause"]["name"], inside["pause"]["allowance_s"]) == ("eval", "eval", 42)
    after = record(tmp_path)
    assert (after["phase"], after["pause"]) == ("train", None) and after["resumed"] >= inside["pause"]["since"]
    beat.phase("reshuffle")
    assert record(tmp_path)["pause"]["name"] == "reshuffle" and "allowance_s" not in record(tmp_path)["pause"]
    beat.step(2)
    assert (record(tmp_path)["phase"], record(tmp_path)["pause"]) == ("train", None)
    beat.close()


def test_step_never_raises_on_numpy_tensors_or_huge_numbers(tmp_path: Path) -> None:
    """Progress is advisory: what a training loop naturally passes must never crash it."""
    import numpy as np
    import torch

    beat = Heartbeat(total_steps=np.int64(100), every_s=0, env=env_for(tmp_path))
    beat.step(torch.tensor(3), epoch=np.int64(1), samples=np.int32(8), loss=torch.tensor(0.5), big=10**400)
    written = record(tmp_path)
    assert (written["step"], written["epoch"], written["samples"], written["total_steps"]) == (3, 1, 8, 100)
    assert written["values"]["loss"] == 0.5 and written["values"]["big"].startswith("1000")
    beat.step(10**400, epoch=float("nan"), samples="many", loss=float("inf"), obj=object())
    written = record(tmp_path)
    assert (written["step"], written["epoch"], written["samples"], written["values"]["loss"]) == (None, None, 8, "inf")
    beat.step(4, samples=torch.tensor([1, 2]))  # not a single number: counted as 0
    assert record(tmp_path)["step"] == 4
    beat.close()


def test_record_keeps_each_values_lowest_and_highest_as_written(tmp_path: Path) -> None:
    beat = Heartbeat(every_s=0, env=env_for(tmp_path))  # every_s=0: each step is written
    table: list[tuple[int, dict[str, object]]] = [
        (1, {"loss": 3.0}),
        (2, {"loss": 1.0, "acc": 0.5}),
        (3, {"loss": 2.0, "acc": "n/a"}),
        (4, {"acc": 0.7}),
    ]
    for step, values in table:
        beat.step(step, **values)
    written = record(tmp_path)
    assert written["values"] == {"acc": 0.7}
    assert written["extremes"] == {"loss": [1.0, 3.0], "acc": [0.5, 0.7]}  # "n/a" is no number: skipped
    beat.step(5, **{f"v{i}": float(i) for i in range(progress.MAX_EXTREMES + 5)})
    assert len(record(tmp_path)["extremes"]) == progress.MAX_EXTREMES  # bounded: loss, acc and 62 of the new
    beat.close()
