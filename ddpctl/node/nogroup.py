"""A run that completed without its ranks ever training together (issue 42): no rank joined a process group.

`pytorch/examples` `ddp/example.py` without GPUs exits 0 at once; torchrun reports success and the run would end
"COMPLETED (training completed)" with no step logged. Each rank's `ddpctl.node.worker` records in its placement
file (attempt-<n>/rank-<r>.json) whether torch.distributed had a default process group by the time the script
exited: `process_group`, read from torch's own records (torch-free: only when the script imported torch). The
completion then carries a warning when every rank of every attempt said no. A rank whose file lacks the field (an
older worker) or a heartbeat step (ddpctl.runtime, which makes a group) means "cannot tell" or "yes": no warning.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ddpctl import safeio
from ddpctl.run.layout import RunLayout, attempts_in, rank_of_info

FIELD = "process_group"
MAX_RANK_FILES = 65_536  # bounded: a run's ranks are at most this many per attempt


def joined_group() -> bool:
    """Whether this process made torch.distributed's default group at any point (without importing torch).

    torch keeps `_default_pg_init_method` (set by a successful init_process_group without a store) and its
    `_distributed_excepthook` through destroy_process_group; is_initialized() covers a group still up."""
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None:
        return False
    try:
        return bool(
            c10d.is_initialized()
            or getattr(c10d, "_default_pg_init_method", None) is not None
            or getattr(sys.excepthook, "__name__", "") == "_distributed_excepthook"
        )
    except Exception:  # torch's internals changed: this rank says nothing rather than something wrong
        return True


def record(rank_info: Path) -> None:
    """Add `process_group` to this rank's placement file (at the script's exit). Never fails the worker."""
    info = safeio.read_json(rank_info)
    if info is None:
        return
    try:
        safeio.write_json_atomic(rank_info, {**info, FIELD: joined_group()})
    except OSError as err:
        print(f"ddpctl.worker: process group not recorded: {err}", file=sys.stderr, flush=True)


def warning(layout: RunLayout) -> str | None:
    """The completion's warning when no rank of any attempt joined a process group; None when one did, when
    the run had one rank, or when ddpctl cannot tell."""
    from ddpctl.health.records import progress_records  # here: the worker imports this module at every start

    ranks: set[int] = set()
    for attempt in attempts_in(_names(layout.root)):
        if any(isinstance(r.get("step"), int) for r in progress_records(layout, attempt).values()):
            return None
        directory = layout.attempt_dir(attempt)
        for name in _names(directory)[:MAX_RANK_FILES]:
            if (rank := rank_of_info(name)) is None:
                continue
            info = safeio.read_json(directory / name)
            if info is None or info.get(FIELD) is not False:
                return None
            ranks.add(rank)
    if len(ranks) < 2:
        return None
    return (
        f"WARNING: none of the {len(ranks)} ranks joined a process group (torch.distributed never initialised, "
        "as each rank found at its exit) and none reported a step: they did not train together"
    )


def _names(directory: Path) -> list[str]:
    try:
        return sorted(p.name for p in directory.iterdir())
    except OSError:
        return []
