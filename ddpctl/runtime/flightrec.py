"""A rank's answer to the hang watchdog's request for its flight-recorder dump (torch-free until asked).

PyTorch's flight recorder (on when TORCH_FR_BUFFER_SIZE > 0, which `ddpctl launch` sets) keeps each rank's last
collectives: sequence number, op, sizes, and whether it completed. Only the rank's own process can read it, and
on a hang its main thread is blocked inside a collective (in C++, the GIL released): so the heartbeat's flusher
thread polls for the watchdog's request (`attempt-<n>/fr-request.json`, one stat per poll) and writes
`fr-rank-<r>.json` atomically, once per attempt. Bounded: the newest MAX_ENTRIES entries, the fields the hang
summary reads (ddpctl.health.collectives), at most MAX_SHAPES tensor shapes each. Never raises into training.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from ddpctl import safeio

MAX_ENTRIES = 64
MAX_SHAPES = 8
FIELDS = ("collective_seq_id", "p2p_seq_id", "is_p2p", "profiling_name", "state", "retired", "time_created_ns")


class Answerer:
    """Polled by the heartbeat's flusher: dumps the recorder once the request exists."""

    def __init__(self, request: Path, out: Path, rank: int) -> None:
        self.request, self.out, self.rank = request, out, rank
        self.answered = False

    def poll(self) -> None:
        if self.answered or not self.request.exists():
            return
        self.answered = True
        with contextlib.suppress(Exception):  # the dump is advisory: nothing about it may stop training
            safeio.write_json_atomic(self.out, {"rank": self.rank, "written": round(time.time(), 3), **dump()})


def dump() -> dict[str, Any]:
    """The recorder's newest entries, trimmed; {"error": why} where there is nothing to read."""
    if "torch.distributed" not in sys.modules:
        return {"error": "torch.distributed not imported"}
    try:
        from torch._C import _distributed_c10d as c10d

        raw = json.loads(c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False))  # type: ignore[attr-defined]
    except Exception as err:  # an older torch, or one built without the recorder
        return {"error": f"no flight recorder: {err!r:.200}"}
    entries = raw.get("entries") or []
    return {
        "entries": [trim(e) for e in entries[-MAX_ENTRIES:] if isinstance(e, dict)],
        "dropped": max(0, len(entries) - MAX_ENTRIES),
        "pg_status": raw.get("pg_status") if isinstance(raw.get("pg_status"), dict) else {},
    }


def trim(entry: dict[str, Any]) -> dict[str, Any]:
    out = {key: entry.get(key) for key in FIELDS}
    group = entry.get("process_group")
    out["process_group"] = [str(g)[:40] for g in group[:2]] if isinstance(group, list) else None
    for key in ("input_sizes", "output_sizes"):
        shapes = entry.get(key)
        out[key] = shapes[:MAX_SHAPES] if isinstance(shapes, list) else []
    return out
