"""Node summaries: each node reads only its own ranks' progress records and the other nodes' summaries.

Every node's watchdog needs the whole job's progress (a hang is judged across all ranks), but reading every
rank's record every second costs each node one open per rank: 4,096 ranks, 512 nodes, ~2M opens/s on a shared
filesystem. Instead each node's watchdog reads its own ranks' records, writes one small summary of them
(`attempt-N/summary-node-<r>.json`, atomically: the digest of each record with only the fields the verdicts use)
and takes the other ranks from the other nodes' summaries: per poll, the node's own ranks plus one file per node.

The verdicts (ddpctl.health.hang, straggler, nodeloss) run unchanged on the merged records, so they are the ones
the whole records would give, up to STALE_S of delay. A summary missing, unreadable or unchanged for STALE_S
(its watchdog has not started, died, or its node froze) covers nothing: the ranks it does not cover are read
from their own records, as every node read them before summaries. So a missing summary can delay nothing into a
false alarm: the verdict never sees fewer ranks, or older progress, than on disk but for STALE_S. A rank is a
node's own when its record says it runs there (`node`); records of ranks no fresh summary claims are read (and
classified) directly, so at start-up, before the first summaries appear, a node reads every record once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ddpctl import safeio
from ddpctl.health.records import Record, record_problem
from ddpctl.run.layout import RunLayout, rank_of_progress

STALE_S = 3.0  # a summary unchanged this long (on the reader's clock) covers nothing: its ranks are read directly
# The fields of a progress record that the verdicts read (hang, straggler, the hang event, node loss).
DIGEST_FIELDS = ("step", "t", "started", "resumed", "phase", "step_s", "busy_s", "window", "node", "written")
MAX_RANKS = 4096  # per summary: more than any node runs; a bigger one is not ours

ReadJson = Callable[[Path], "dict[str, Any] | None"]
ListNames = Callable[[Path], "list[str]"]


def digest(record: Record) -> Record:
    """The part of a progress record the verdicts use (a declared pause: its name and allowance only)."""
    out = {key: record[key] for key in DIGEST_FIELDS if record.get(key) is not None}
    pause = record.get("pause")
    if isinstance(pause, dict):
        out["pause"] = {"name": str(pause.get("name"))[:40], "allowance_s": pause.get("allowance_s")}
    return out


def summary(node: str, node_rank: int, seq: int, own: Mapping[int, Record]) -> dict[str, Any]:
    return {"node": node, "node_rank": node_rank, "seq": seq, "ranks": {str(r): digest(own[r]) for r in sorted(own)}}


def summary_ranks(found: Any) -> dict[int, Record] | None:
    """rank -> digest from a summary as read (untrusted); None when it is not a usable summary."""
    if not isinstance(found, dict) or not isinstance(found.get("seq"), int) or not isinstance(found.get("ranks"), dict):
        return None
    ranks = found["ranks"]
    if len(ranks) > MAX_RANKS:
        return None
    out: dict[int, Record] = {}
    for key, record in ranks.items():
        usable = isinstance(key, str) and key.isdigit() and len(key) < 10 and isinstance(record, dict)
        if usable and record_problem(record) is None:
            out[int(key)] = record
    return out


def merge(
    own: Mapping[int, Record], covered: Iterable[Mapping[int, Record]], direct: Mapping[int, Record]
) -> dict[int, Record]:
    """The job's records as one node sees them: its own ranks' (read), the fresh summaries', and those read
    directly because no fresh summary covers them. A node's own reading of a record wins."""
    out: dict[int, Record] = {}
    for ranks in covered:
        out.update(ranks)
    out.update(direct)
    out.update(own)
    return out


def _listdir(directory: Path) -> list[str]:
    return [entry.name for entry in directory.iterdir()]


class Seat(NamedTuple):
    """Where one node's launcher stands in the job: the run dir, the attempt, its host, its node rank and the
    job's node count. The node's view, watchdog and peer watch all sit there; they get it from the one view."""

    layout: RunLayout
    attempt: int
    node: str
    node_rank: int
    nodes: int


class JobView:
    """One node's view of the job's progress records, through its own ranks and the other nodes' summaries.

    `read` and `names` are the only ways it touches the run dir (a test counts the files it opens through them).
    Thread-safe: the watchdog and the peer watch share one view and one read per poll."""

    def __init__(
        self,
        seat: Seat,
        *,
        read: ReadJson = safeio.read_json,
        names: ListNames = _listdir,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seat = seat
        self.layout, self.attempt, self.node, self.node_rank, self.nodes = seat
        self._read, self._names, self._clock = read, names, clock
        self.own: set[int] = set()  # ranks whose records say they run on this node
        self._seq = 0
        self._changed: dict[int, tuple[int, float]] = {}  # peer node rank -> (its summary's seq, when first seen)
        self._lock = threading.Lock()
        self._last: tuple[float, dict[int, Record]] | None = None

    def records(self, max_age_s: float = 0.0) -> dict[int, Record]:
        """rank -> its progress record (or digest); a look younger than `max_age_s` is returned as it was."""
        with self._lock:
            now = self._clock()
            if self._last is None or now - self._last[0] >= max_age_s:
                self._last = (now, self._look(now))
            return self._last[1]

    def _look(self, now: float) -> dict[int, Record]:
        covered = [ranks for peer in range(self.nodes) if peer != self.node_rank and (ranks := self._peer(peer, now))]
        claimed = {rank for ranks in covered for rank in ranks}
        try:
            listed = {
                rank
                for name in self._names(self.layout.attempt_dir(self.attempt))
                if (rank := rank_of_progress(name)) is not None
            }
        except OSError:
            listed = set()
        own: dict[int, Record] = {}
        direct: dict[int, Record] = {}
        for rank in sorted((listed - claimed) | self.own):
            record = self._read(self.layout.progress_file(self.attempt, rank))
            if record is None or record_problem(record) is not None:
                continue
            if record.get("node") == self.node:
                self.own.add(rank)
                own[rank] = record
            else:
                direct[rank] = record
        self._publish(own)
        return merge(own, covered, direct)

    def _peer(self, peer: int, now: float) -> dict[int, Record] | None:
        """A peer's summary, when it changed within STALE_S on this reader's clock."""
        found = self._read(self.layout.node_summary(self.attempt, peer))
        ranks = summary_ranks(found)
        if ranks is None or found is None:
            return None
        seq = found["seq"]
        last = self._changed.get(peer)
        if last is None or last[0] != seq:
            self._changed[peer] = last = (seq, now)
        return ranks if now - last[1] <= STALE_S else None

    def _publish(self, own: Mapping[int, Record]) -> None:
        self._seq += 1
        # The run dir unreachable from here: the others read this node's ranks' records directly once it is stale.
        with contextlib.suppress(OSError):
            safeio.write_json_atomic(
                self.layout.node_summary(self.attempt, self.node_rank),
                summary(self.node, self.node_rank, self._seq, own),
            )
