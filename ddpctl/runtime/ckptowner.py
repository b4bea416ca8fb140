"""Which run wrote a checkpoint, so retention never deletes another run's work (issue: shared checkpoint dirs).

Every step directory gets an `OWNER` file before anything else is written into it, and the `COMPLETE` marker
repeats the owner. A run is its run directory (`$DDPCTL_RUN_DIR`: every attempt of a job shares it); a script run
without ddpctl gets an id agreed by its ranks for this process group's lifetime. A run may delete only the
checkpoints it wrote itself and the one it resumed from (it continues that timeline). Checkpoints of another run
that this one cannot resume (another world size) mean the directory is shared by unrelated runs: that is refused,
loudly, before any save could collide with them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddpctl.run import envvars
from ddpctl.runtime import ckptio

OWNER = "OWNER"


class SharedCheckpointDir(RuntimeError):
    """The checkpoint directory holds another run's checkpoints that this run must not touch."""


def run_identity(env: Mapping[str, str]) -> str | None:
    """This run's owner string, or None when no run directory says (the caller then agrees on a fresh id)."""
    run_dir = env.get(envvars.RUN_DIR)
    return str(Path(run_dir).resolve()) if run_dir else None


def fresh_identity() -> str:
    return f"unmanaged-{uuid.uuid4().hex}"


def owner_of(step_dir: Path) -> str | None:
    """The run that wrote `step_dir` (from OWNER, else the marker); None for a checkpoint of ddpctl < 0.2."""
    for name in (OWNER, "COMPLETE"):
        data = ckptio.read_table(step_dir / name)
        if isinstance(data, dict) and isinstance(data.get("owner"), str):
            return str(data["owner"])
    return None


def claim(step_dir: Path, me: str) -> None:
    """Make `step_dir` ours before writing into it; refuse if another run already wrote (or is writing) it."""
    owner = owner_of(step_dir)
    if owner is not None and owner != me:
        raise SharedCheckpointDir(
            f"checkpoint {step_dir} belongs to another run ({owner}); refusing to overwrite it: "
            "give each run its own checkpoint.dir"
        )
    if owner is None and (step_dir / "COMPLETE").exists():
        raise SharedCheckpointDir(
            f"checkpoint {step_dir} is complete and was written by an unknown run; refusing to overwrite it: "
            "give each run its own checkpoint.dir"
        )
    if owner is None:
        ckptio.atomic_write_json({"owner": me}, step_dir / OWNER)


def foreign_unresumable(marker: Any, me: str, world_size: int) -> str | None:
    """Why a complete checkpoint shows the directory is shared with an unrelated run, or None."""
    if not isinstance(marker, dict):
        return None
    owner = marker.get("owner")
    if owner == me or marker.get("world_size") == world_size:
        return None
    return f"saved by {marker.get('world_size')} ranks of another run ({owner or 'unknown'}), running {world_size}"


def refusal(directory: Path, reasons: list[str]) -> str:
    return (
        f"checkpoint directory {directory} is shared with another run this one cannot resume "
        f"({reasons[0]}{f', and {len(reasons) - 1} more' if len(reasons) > 1 else ''}); "
        "refusing to write there (its retention could delete that run's checkpoints): give each run its own "
        "checkpoint.dir, or remove the other run's checkpoints"
    )


def may_delete(step_dir: Path, me: str, adopted: set[int], step: int) -> bool:
    """Retention's rule: only our own checkpoints and the one we resumed from; a leftover with no owner
    and no marker is an interrupted save from before owners were recorded."""
    if step in adopted:
        return True
    owner = owner_of(step_dir)
    if owner is None:
        return not (step_dir / "COMPLETE").exists() and not (step_dir / OWNER).exists()
    return owner == me
