"""The local backend's end of the grace time (pure parts): when to kill, and what the kill cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.backends.local.grace import TimeLimit, kill_due, lost_text, stray_checkpoint
from ddpctl.spec import JobSpec, RequeuePolicy


@pytest.mark.parametrize(
    ("requested_at", "now", "acknowledged", "due"),
    [
        (None, 100.0, False, False),  # no stop asked
        (100.0, 103.9, False, False),  # inside lead time + slack
        (100.0, 104.0, False, True),
        (100.0, 500.0, True, False),  # acknowledged: the ranks are saving, not ignoring it
    ],
)
def test_kill_due(requested_at: float | None, now: float, acknowledged: bool, due: bool) -> None:
    assert kill_due(requested_at, 3, now, acknowledged) is due


@pytest.mark.parametrize(
    ("last", "ckpt", "age", "text"),
    [
        (130, 100, 12.0, "30 step(s) lost (step 130 reached, newest checkpoint at step 100)"),
        (130, 140, 1.0, "0 step(s) lost (step 130 reached, newest checkpoint at step 140)"),
        (130, None, None, "all 130 step(s) of this attempt lost (no checkpoint to resume from)"),
        (None, None, None, "no checkpoint to resume from: the next attempt starts from scratch"),
        (None, None, 12.4, "the work of the 12 s since the newest checkpoint file is lost"),
        (130, None, 12.4, "the work of the 12 s since the newest checkpoint file is lost"),
        # A preset's checkpoint names its step (an HF Trainer's checkpoint-200/), the script logs none.
        (None, 200, 4.2, "the work of the 4 s since the checkpoint of step 200 is lost"),
    ],
)
def test_lost_text(last: int | None, ckpt: int | None, age: float | None, text: str) -> None:
    assert lost_text(last, ckpt, age) == text


# Issue 42: a tutorial script saves snapshot.pt in its working directory; "no checkpoint to resume from" was false.
@pytest.mark.parametrize("last", [None, 130])
def test_lost_text_names_a_checkpoint_outside_the_run_dir(last: int | None) -> None:
    assert lost_text(last, None, None, "/w/snapshot.pt") == (
        "nothing in checkpoint.dir, but /w/snapshot.pt (in the working directory, outside the run dir: every job "
        "of this spec sees it) may be what the script resumes from"
    )


def test_stray_checkpoint(tmp_path: Path) -> None:
    assert stray_checkpoint(tmp_path) is None
    (tmp_path / "train.py").write_text("")
    (tmp_path / "data.csv").write_text("")
    assert stray_checkpoint(tmp_path) is None
    (tmp_path / "snapshot.pt").write_text("x")
    assert stray_checkpoint(tmp_path) == str(tmp_path / "snapshot.pt")


def clock(time: str | None, lead_s: int = 60, enabled: bool = True) -> TimeLimit:
    spec = JobSpec(name="j", script="t.py", time=time, requeue=RequeuePolicy(enabled=enabled, lead_s=lead_s))
    return TimeLimit(spec, started=1000.0)


@pytest.mark.parametrize(
    ("time", "lead_s", "enabled", "warned_at", "killed_at"),
    [
        ("2", 60, True, 1060.0, 1121.0),  # 2 minutes: the warning 60 s before, the kill at the limit (+ slack)
        ("0:30", 60, True, 1000.0, 1031.0),  # a limit shorter than the lead time: the warning at once
        ("2", 60, False, None, 1121.0),  # no requeue: no --signal, so no warning; the limit still kills
        (None, 60, True, None, None),  # no time: the partition's, unknown here: nothing
        ("UNLIMITED", 60, True, None, None),
    ],
)
def test_time_limit(
    time: str | None, lead_s: int, enabled: bool, warned_at: float | None, killed_at: float | None
) -> None:
    limit = clock(time, lead_s, enabled)
    ticks = [1000.0 + t / 2 for t in range(400)]
    warnings = [t for t in ticks if limit.warning_due(t)]
    assert warnings == ([warned_at] if warned_at is not None else [])  # once
    assert next((t for t in ticks if limit.kill_due(t)), None) == killed_at


def test_time_left_for_the_signals_kind() -> None:
    assert clock("2").left(1060.0) == 60
    assert clock("2").left(2000.0) == 0
    assert clock(None).left(1060.0) is None


def test_a_presets_checkpoint_is_what_the_kill_measures_against(tmp_path: Path) -> None:
    """An HF Trainer script logs no progress; its output dir holds checkpoint-N/ and, after a save, files it writes
    beside them (README.md, the weights): the loss is counted from the checkpoint the next attempt resumes from."""
    import os

    from ddpctl.backends.local.grace import measure
    from ddpctl.run.layout import RunLayout
    from ddpctl.spec import ResumeSettings

    spec = JobSpec(name="x", script="t.py", resume=ResumeSettings(preset="hf-trainer"))
    layout = RunLayout(tmp_path)
    ckpt = layout.checkpoints(spec.checkpoint.dir)
    (ckpt / "checkpoint-200").mkdir(parents=True)
    (ckpt / "checkpoint-200" / "trainer_state.json").write_text("{}")
    (ckpt / "checkpoint-250").mkdir()  # cut by the kill: no trainer_state.json
    (ckpt / "README.md").write_text("x")
    # A directory checkpoint is as old as its completing file (resumepoint: trainer_state.json, written last).
    marker = "checkpoint-200/trainer_state.json"
    for name, mtime in (("checkpoint-200", 90.0), (marker, 100.0), ("checkpoint-250", 150.0), ("README.md", 160.0)):
        os.utime(ckpt / name, (mtime, mtime))
    facts = measure(layout, spec, 0, 104.2)
    assert facts == {
        "last_step": None,
        "checkpoint_step": 200,
        "checkpoint": str(ckpt / "checkpoint-200"),
        "checkpoint_age_s": 4.2,
    }
    assert lost_text(None, 200, 4.2) == "the work of the 4 s since the checkpoint of step 200 is lost"
    (ckpt / "checkpoint-200" / "trainer_state.json").unlink()  # none complete: nothing to resume from
    assert measure(layout, spec, 0, 104.2)["checkpoint"] is None
