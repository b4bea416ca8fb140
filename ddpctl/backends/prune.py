"""`ddpctl list --prune`: the registry keeps every job ever submitted until told otherwise; this drops the
records of jobs that ended long ago, never a live one.

A record goes when its job was submitted more than the age bound ago and it has certainly ended, as its backend
tells (`Backend.live_ids`): a local job whose run dir lock nobody holds (its supervisor and launchers are gone;
for a sweep's task not started yet, its queue is gone too), a Slurm job none of whose jobs squeue lists (one
squeue call per backend). When squeue cannot answer, no Slurm record is dropped. The rewrite
holds the registry's exclusive lock, so a submit recording its job meanwhile waits and loses nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ddpctl import backends
from ddpctl.backends import get_backend
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord, Registry

Live = Callable[[list[JobRecord]], set[str]]  # the job ids among these records that may still run


@dataclass(frozen=True)
class Pruned:
    kept: int
    dropped: int


def candidates(records: list[JobRecord], now: float, older_than_s: float) -> list[JobRecord]:
    """The records old enough to go, if their jobs ended (pure)."""
    return [r for r in records if now - r.submitted_at >= older_than_s]


def prune(registry: Registry, now: float, older_than_s: float, live: Live = backends.live_ids) -> Pruned:
    with registry.locked(exclusive=True):
        records = registry.records()  # one line per job: a prune also drops superseded lines
        old = candidates(records, now, older_than_s)
        still = live(old)
        gone = {r.job_id for r in old if r.job_id not in still}
        kept = [r for r in records if r.job_id not in gone]
        if records or registry.path.exists():
            registry.rewrite(kept)
    return Pruned(len(kept), len(gone))


def run_dir_of(record: JobRecord) -> Path | None:
    """The run dir `ddpctl prune` may remove: a directory, not a link, named after the job and holding its
    job.yaml; None for anything else (a registry line is not trusted to name what gets deleted)."""
    path = Path(record.run_dir)
    if path.name != record.job_id or path.is_symlink() or not path.is_dir():
        return None
    return path if RunLayout(path).spec_file.is_file() else None


def prune_runs(
    registry: Registry, now: float, older_than_s: float, live: Live = backends.live_ids, *, dry_run: bool = False
) -> tuple[list[Path], int]:
    """`ddpctl prune`: the run dirs (code copy, logs, checkpoints) and records of jobs that certainly ended
    and were submitted more than `older_than_s` ago; never a live one. Returns the run dirs removed (to be,
    with `dry_run`) and how many records went."""
    with registry.locked(exclusive=True):  # a submit meanwhile waits: its new record is never dropped
        records = registry.records()
        old = candidates(records, now, older_than_s)
        still = live(old)
        ended = [r for r in old if r.job_id not in still]
        removed = []
        for record in ended:
            path = run_dir_of(record)
            # Asked again just before: a local run is live exactly while someone holds its lock.
            if path is None or (record.backend in backends.MODULES and get_backend(record.backend).holds_run(path)):
                continue
            if not dry_run:
                shutil.rmtree(path)  # links inside are removed, never followed
            removed.append(path)
        if not dry_run:
            gone = {r.job_id for r in ended}
            registry.rewrite([r for r in records if r.job_id not in gone])
    return removed, len(ended)
