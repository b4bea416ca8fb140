"""Node-lost verdict (pure): has a peer node of this attempt stopped answering?

Every node's launcher rewrites its heartbeat (`beat-node-<r>.json`) every BEAT_S and reads its peers'. Ages are
measured on the reader's own monotonic clock, from the moment it first saw a peer's current beat (ddpctl.health.
peers), so nodes' clocks need not agree. A peer is lost when

- its heartbeat has not changed for LOST_S (it died, froze, or can no longer reach the shared run dir), or
- it never wrote one within NEVER_S of this launcher's start, or
- it is cut off from the others' network (`cut_off`, from the nodes' network beat, ddpctl.health.probe): its
  predecessor in the ring has not reached it for CUT_S, nor it its successor.

A peer whose launcher said it is done (its torchrun exited, it left cleanly) is never lost. Nor is one whose
launcher beats while its ranks are silent: a rank that holds the GIL in C code, or waits out a declared pause, or
is wedged, is the hang watchdog's matter, judged with its allowances (ddpctl.health.watchdog). Judging ranks here
ended healthy runs: a node whose ranks were slower to come back from torchrun's own restart, or one whose only
rank held the GIL for 30 s inside a declared pause, was called lost beside a peer whose pulse thread kept writing.
A node that really died or froze stops its launcher's beat too, and that is what is judged.

Why LOST_S = 15 s cannot end a healthy run: the heartbeat is written by a thread of the launcher that does nothing
else (the launcher itself only polls torchrun), so neither the ranks' work nor a collective blocked on a dead peer
delays it; at a load of 10 on two cores a runnable thread waits milliseconds, not seconds, for a CPU (the launcher
runs niced by 5, which lowers its share, not its turn). 15 s is seven missed beats. The reader, in turn, never
judges after a gap in its own polling (it was frozen or starved itself: every peer would look stale), and starts
its clocks afresh then. 15 s + one poll keeps node death or freeze → every surviving rank stopped within the
30 s target, with room for torchrun's own shutdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

BEAT_S = 2.0  # how often each launcher rewrites its heartbeat
LOST_S = 15.0  # a heartbeat unchanged this long: the node is lost
NEVER_S = 60.0  # a node that never wrote one this long after this launcher started: lost (it never came up)
POLL_GAP_S = 5.0  # a reader whose own polls were this far apart judges nothing until it has looked again
CUT_S = 15.0  # a node's network beat has failed this long: as LOST_S, seven missed beats' worth


@dataclass(frozen=True)
class PeerBeat:
    """What one reader knows of one peer's heartbeat."""

    age_s: float  # since the reader first saw the peer's current beat (or since its own start, when never seen)
    seen: bool  # a beat of this peer was ever read
    done: bool  # the peer's launcher said it is leaving (torchrun exited)
    node: str | None = None  # the node's name, from its beat
    probe: str | None = None  # where its network beat listens (host:port), from its beat
    unreachable_s: float | None = None  # how long it has failed to reach its successor, by its own clock


@dataclass(frozen=True)
class LostVerdict:
    node_rank: int | None  # None: one of two nodes that cannot reach each other, which one cannot be told
    node: str | None
    why: str
    silent_s: float  # since its last sign of life, as this reader measured it


def lost_node(beats: Mapping[int, PeerBeat]) -> LostVerdict | None:
    """The first lost peer (lowest node rank), or None. `beats`: every peer node rank but the reader's own."""
    for node_rank in sorted(beats):
        beat = beats[node_rank]
        if beat.done:
            continue
        if beat.seen and beat.age_s > LOST_S:
            why = f"its heartbeat stopped {beat.age_s:.0f} s ago (allowed {LOST_S:g} s)"
            return LostVerdict(node_rank, beat.node, why, round(beat.age_s, 1))
        if not beat.seen and beat.age_s > NEVER_S:
            why = f"it wrote no heartbeat in {beat.age_s:.0f} s since the attempt started (allowed {NEVER_S:g} s)"
            return LostVerdict(node_rank, beat.node, why, round(beat.age_s, 1))
    return None


def cut_off(unreachable: Mapping[int, float | None], names: Mapping[int, str | None], nodes: int) -> LostVerdict | None:
    """The node cut off from the others' network, or None. `unreachable`: node rank -> how long it has failed to
    reach the next node in the ring (rank + 1 mod nodes), None while it reaches it. A node is cut off when its
    predecessor has not reached it for CUT_S and it has not reached its successor for CUT_S: with three nodes or
    more, one cut link fails exactly those two probes. Two nodes that cannot reach each other are that too, but
    whose link is down cannot be told: the verdict then names neither (the attempt still ends: no collective
    can complete)."""

    def failing(rank: int) -> float | None:
        value = unreachable.get(rank)
        return value if value is not None and value >= CUT_S else None

    def name(rank: int) -> str:
        return names.get(rank) or f"node rank {rank}"

    if nodes == 2 and (a := failing(0)) is not None and (b := failing(1)) is not None:
        why = f"{name(0)} and {name(1)} have not reached each other for {min(a, b):.0f} s"
        why += "; which one's link is down cannot be told"
        return LostVerdict(None, None, why, round(min(a, b), 1))
    for rank in range(nodes if nodes > 2 else 0):
        before, after = (rank - 1) % nodes, (rank + 1) % nodes
        if (into := failing(before)) is not None and (out := failing(rank)) is not None:
            why = (
                f"cut off from the others' network: {name(before)} has not reached it for {into:.0f} s,"
                f" nor it {name(after)} for {out:.0f} s"
            )
            return LostVerdict(rank, names.get(rank), why, round(min(into, out), 1))
    return None


class Freshness:
    """Per key, when (on the caller's monotonic clock) its value last changed; a gap in the caller's own looks
    longer than POLL_GAP_S restarts every clock (the caller was not looking: it cannot tell who stopped)."""

    def __init__(self, now: float) -> None:
        self.started = now
        self._last_look = now
        self._seen: dict[object, tuple[object, float]] = {}

    def look(self, now: float) -> bool:
        """Record a look at `now`; False when the previous one was too long ago (judge nothing this time)."""
        gap = now - self._last_look
        self._last_look = now
        if gap > POLL_GAP_S:
            self.started = now
            self._seen = {key: (value, now) for key, (value, _at) in self._seen.items()}
            return False
        return True

    def age(self, key: object, value: object, now: float) -> float:
        """Seconds since `value` was first seen for `key` (a new value: 0)."""
        old = self._seen.get(key)
        if old is None or old[0] != value:
            self._seen[key] = (value, now)
            return 0.0
        return now - old[1]

    def unseen_age(self, now: float) -> float:
        return now - self.started
