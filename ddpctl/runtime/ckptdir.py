"""A checkpoint directory's names: where checkpoints go, one step's directory and the files in it (the layout
ddpctl.runtime.checkpoint's docstring draws); the Checkpointer decides what to write and load."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ddpctl.run import envvars
from ddpctl.run.layout import RunLayout

MARKER = "COMPLETE"
SHARED = "shared.pt"


def default_dir(env: Mapping[str, str]) -> Path:
    if env.get(envvars.CKPT_DIR):
        return Path(env[envvars.CKPT_DIR])
    if env.get(envvars.RUN_DIR):
        return RunLayout(Path(env[envvars.RUN_DIR])).default_checkpoints
    return Path("checkpoints")


def step_dirname(step: int) -> str:
    return f"step-{step:09d}"


def parse_step(name: str) -> int | None:
    head, _, digits = name.partition("-")
    return int(digits) if head == "step" and digits.isdigit() else None


def rank_part(rank: int) -> str:
    """A rank's own part of a step (RNG states, sampler position)."""
    return f"rank-{rank}.pt"


def rank_table(rank: int) -> str:
    """A rank's table of its files' sizes and CRC-32, written after them."""
    return f"rank-{rank}.json"


def step_dirs(directory: Path) -> dict[int, Path]:
    """The step directories under `directory`, by step (marked or not)."""
    if not directory.is_dir():
        return {}
    found = {parse_step(p.name): p for p in directory.iterdir() if p.is_dir()}
    return {step: path for step, path in found.items() if step is not None}
