"""`status`'s "newest checkpoint" (ddpctl.health.report.newest_checkpoint): for a script whose checkpoints a
preset describes, the one the next attempt resumes from, never whatever file the trainer wrote last beside it (an
HF Trainer's run_clm.py ends by writing README.md, config.json and the weights into its output directory)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ddpctl.health.report import newest_checkpoint
from ddpctl.run.layout import RunLayout
from ddpctl.run.summary import summarize


def run_with(tmp_path: Path, **spec: object) -> tuple[RunLayout, Path]:
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    layout.spec_file.write_text(yaml.safe_dump({"name": "clm", "script": "run_clm.py", **spec}))
    ckpt = layout.checkpoints(None)
    ckpt.mkdir(parents=True)
    return layout, ckpt


def entry(path: Path, mtime: float, *, directory: bool = False, marker: str | None = None) -> None:
    if directory:
        path.mkdir()
        if marker:
            (path / marker).write_text("{}")
    else:
        path.write_text("x")
    os.utime(path, (mtime, mtime))


def test_a_presets_newest_complete_checkpoint_not_the_last_file_written(tmp_path: Path) -> None:
    layout, ckpt = run_with(tmp_path, resume={"preset": "hf-trainer"})
    assert newest_checkpoint(layout) is None
    entry(ckpt / "checkpoint-70", 100.0, directory=True, marker="trainer_state.json")
    entry(ckpt / "checkpoint-80", 200.0, directory=True)  # being written: no trainer_state.json yet
    entry(ckpt / "README.md", 300.0)
    entry(ckpt / "model.safetensors", 300.0)
    assert newest_checkpoint(layout) == ckpt / "checkpoint-70"
    # status' "last step": the checkpoint's name, not the trainer's log ("... with epoch 3 and global step 300")
    (layout.attempt_dir(1)).mkdir(parents=True)
    layout.rank_log(1, 0).write_text("Resuming training from checkpoint with epoch 3 and global step 300\n")
    assert (summarize(layout).last_step, summarize(layout).step_from) == (70, "checkpoint")
    (ckpt / "checkpoint-80" / "trainer_state.json").write_text("{}")
    assert newest_checkpoint(layout) == ckpt / "checkpoint-80"


def test_without_a_preset_the_newest_entry_stands(tmp_path: Path) -> None:
    layout, ckpt = run_with(tmp_path)
    entry(ckpt / "a.pt", 100.0)
    entry(ckpt / "b.pt", 200.0)
    assert newest_checkpoint(layout) == ckpt / "b.pt"
    layout.attempt_dir(0).mkdir(parents=True)
    layout.rank_log(0, 0).write_text("step 12\n")
    assert (summarize(layout).last_step, summarize(layout).step_from) == (12, "log")  # no preset: the log's
