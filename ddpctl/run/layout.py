"""Every path under a run directory, in one place (pure: nothing here touches the filesystem).

    <run_dir>/<name>/<job_id>/
        job.yaml            resolved spec as submitted
        job.sbatch          rendered batch script (sbatch backend)
        slurm.out           batch-shell output, appended across requeues (--open-mode=append)
        events.jsonl        one JSON object per line: submit, start, signal, stop, checkpoint, decision, exit
        checkpoints/        default checkpoint directory (spec checkpoint.dir overrides)
        attempt-<restart>/  one per run of the job (SLURM_RESTART_COUNT, 0 on the first run)
            rank-<global rank>.log    worker stdout+stderr, appended
            node-<node rank>.log      launcher (torchrun agent) output for that node
            node-<node rank>.json     written by that node's launcher: node name, node rank, global ranks
            stop-node-<node rank>     exists once that node's launcher received the stop signal
            stopped.json              written by rank 0 after the agreed stop checkpoint
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ATTEMPT_RE = re.compile(r"^attempt-(\d+)$")
RANK_LOG_RE = re.compile(r"^rank-(\d+)\.log$")


@dataclass(frozen=True)
class RunLayout:
    root: Path

    @property
    def spec_file(self) -> Path:
        return self.root / "job.yaml"

    @property
    def script_file(self) -> Path:
        return self.root / "job.sbatch"

    @property
    def batch_log(self) -> Path:
        return self.root / "slurm.out"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def default_checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def preempt_request(self) -> Path:
        """Written by `ddpctl preempt --as KIND` just before it signals, so the decision knows the kind."""
        return self.root / "preempt-request.json"

    def attempt_dir(self, restart: int) -> Path:
        return self.root / f"attempt-{restart}"

    def rank_log(self, restart: int, rank: int) -> Path:
        return self.attempt_dir(restart) / f"rank-{rank}.log"

    def node_log(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"node-{node_rank}.log"

    def node_info(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"node-{node_rank}.json"

    def stop_file(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"stop-node-{node_rank}"

    def stopped_marker(self, restart: int) -> Path:
        return self.attempt_dir(restart) / "stopped.json"


RANK_PLACEHOLDER = "{rank}"


def fill_rank(pattern: str, rank: str) -> Path:
    """The rank log path from `$DDPCTL_RANK_LOG_PATTERN`: `{rank}` is replaced in the file name only.

    Paths are data, never format strings: the directory part (the user's run_dir) may hold `{x}`, `%` or even
    `{rank}` and is used exactly as written.
    """
    path = Path(pattern)
    return path.parent / path.name.replace(RANK_PLACEHOLDER, rank)


def slurm_filename(path: Path) -> str:
    """`path` as literal text inside a Slurm filename pattern (--output): `%` is Slurm's escape, so double it."""
    return str(path).replace("%", "%%")


def attempt_number(dirname: str) -> int | None:
    match = ATTEMPT_RE.match(dirname)
    return int(match.group(1)) if match else None


def rank_of_log(filename: str) -> int | None:
    match = RANK_LOG_RE.match(filename)
    return int(match.group(1)) if match else None
