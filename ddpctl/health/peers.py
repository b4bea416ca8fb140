"""The nodes of an attempt watch each other: every launcher's heartbeat thread (`ddpctl launch`).

Each node's launcher writes its heartbeat (`beat-node-<r>.json`) every nodeloss.BEAT_S, whatever its ranks do,
and reads its peers' heartbeats and the ranks' progress records (through the view it shares with the watchdog,
ddpctl.health.summary: a node summary carries each rank's `written` time). When the verdict (ddpctl.health.nodeloss)
finds a peer lost, the first node to create the attempt's node-lost.json records the `node-lost` event; every node that
sees that file ends its torchrun (the ranks cannot agree on a step with a dead peer: the newest complete
checkpoint is the resume point), and the batch shell, which tests for the file while it waits for srun, stops
waiting for a step that a frozen or cut-off node may never let end (templates/ddp.sbatch.j2).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable

from ddpctl import safeio
from ddpctl.health import nodeloss
from ddpctl.health.nodeloss import Freshness, LostVerdict, PeerBeat
from ddpctl.health.probe import Prober
from ddpctl.health.summary import JobView
from ddpctl.run import history, notify
from ddpctl.run.history import NodeLost

POLL_S = 1.0


class PeerWatch:
    def __init__(self, view: JobView, *, end_attempt: Callable[[], None], address: str | None = None) -> None:
        """`view` is the node's one view of the job's progress (shared with its watchdog), and where it sits."""
        self.view = view
        self.layout, self.attempt, self.node, self.node_rank, self.nodes = view.seat
        self.end_attempt = end_attempt
        self.prober = network_beat(address) if self.nodes > 1 else None
        self.lost: LostVerdict | None = None
        self.ended = False  # this node ended its torchrun for a lost node
        self._seq = 0
        self._failed = False
        self._stop = threading.Event()
        self._fresh = Freshness(time.monotonic())
        self._thread = threading.Thread(target=self._run, name="ddpctl-peers", daemon=True)

    def start(self) -> None:
        if self.prober is not None:
            self.prober.start()
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        """torchrun exited: the last beat says so (peers never count a node that left as lost)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.beat(done=True)
        if self.prober is not None:
            self.prober.stop()  # after the last beat: a peer never probes a node that said it left

    def linger(self, bound_s: float = nodeloss.LOST_S + 2 * POLL_S) -> None:
        """torchrun failed on its own: a peer that died may have taken this node's ranks with it (a collective's
        connection reset), and then its loss, not their errors, is what ended the attempt. Watch the peers until
        each has left or beaten since (alive: a rank's own failure, theirs to follow), or one is found lost
        (recorded as such), at most `bound_s`: a failure with live peers costs a beat or two, not LOST_S."""
        if self.nodes < 2 or self.ended:
            return
        started = time.monotonic()
        self.peer_beats(started)  # the beats as they are now: a newer one says its node is alive
        while (elapsed := time.monotonic() - started) < bound_s:
            beats = self.peer_beats(time.monotonic())
            if all(b.done or (b.seen and b.age_s < elapsed) for b in beats.values()) or self.check():
                return
            time.sleep(POLL_S)

    def beat(self, done: bool = False) -> None:
        self._seq += 1
        record: dict[str, object] = {
            "node": self.node,
            "node_rank": self.node_rank,
            "seq": self._seq,
            "t": time.time(),
            "done": done,
        }
        if self.prober is not None:
            record.update(probe=self.prober.endpoint, unreachable_s=self.prober.unreachable_s())
        with contextlib.suppress(OSError):  # the run dir is unreachable from here: peers will say so
            safeio.write_text_atomic(self.layout.node_beat(self.attempt, self.node_rank), json.dumps(record) + "\n")

    def _run(self) -> None:
        next_beat = time.monotonic() + nodeloss.BEAT_S
        while not self._stop.wait(POLL_S):
            if time.monotonic() >= next_beat:
                self.beat()
                next_beat = time.monotonic() + nodeloss.BEAT_S
            # Beats go on after an end: this node is still leaving, and must not look lost meanwhile.
            if self.nodes > 1 and not self.ended:
                try:
                    self.check()
                except Exception as err:  # a dead thread would leave the job unwatched: say it once, go on
                    if not self._failed:
                        print(f"ddpctl peers [{self.node}]: a look failed, watching on: {err!r:.200}", flush=True)
                    self._failed = True

    def check(self) -> bool:
        """One look: True once this node ended its attempt for a lost node."""
        now = time.monotonic()
        judge = self._fresh.look(now)
        beats, (rank_ages, rounds) = self.peer_beats(now), self.rank_ages(now)
        if self.layout.node_lost_marker(self.attempt).exists():
            self.ended = True
        elif (
            judge
            and (lost := nodeloss.lost_node(beats, rank_ages, self.node, rounds) or self.cut_off(beats)) is not None
        ):
            self.lost, self.ended = lost, True
            if self._claim(lost):
                event = history.append(
                    self.layout.events,
                    NodeLost(
                        attempt=self.attempt,
                        node=lost.node,
                        node_rank=lost.node_rank,
                        why=lost.why,
                        silent_s=lost.silent_s,
                        found_by=self.node,
                    ),
                )
                notify.on_event(self.layout, event)  # in the background, never raises
        if self.ended:
            self.end_attempt()
        return self.ended

    def cut_off(self, beats: dict[int, PeerBeat]) -> LostVerdict | None:
        """The network beat's verdict (ddpctl.health.probe): aim this node's probe at the next node's listener,
        and judge from every node's report of its own probe, this one's included."""
        if self.prober is None:
            return None
        after = beats.get((self.node_rank + 1) % self.nodes)
        self.prober.aim(after.probe if after is not None and not after.done else None)
        unreachable = {rank: beat.unreachable_s for rank, beat in beats.items() if not beat.done}
        unreachable[self.node_rank] = self.prober.unreachable_s()
        names = {rank: beat.node for rank, beat in beats.items()} | {self.node_rank: self.node}
        return nodeloss.cut_off(unreachable, names, self.nodes)

    def peer_beats(self, now: float) -> dict[int, PeerBeat]:
        out = {}
        for rank in range(self.nodes):
            if rank == self.node_rank:
                continue
            record = safeio.read_json(self.layout.node_beat(self.attempt, rank))
            if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
                out[rank] = PeerBeat(self._fresh.unseen_age(now), seen=False, done=False)
                continue
            node = record.get("node")
            out[rank] = PeerBeat(
                self._fresh.age(("beat", rank), record["seq"], now),
                seen=True,
                done=record.get("done") is True,
                node=node if isinstance(node, str) else None,
                probe=probe if isinstance(probe := record.get("probe"), str) else None,
                unreachable_s=seconds(record.get("unreachable_s")),
            )
        return out

    def rank_ages(self, now: float) -> tuple[dict[str, list[float]], dict[str, int]]:
        """Per node, its ranks' record ages, and the oldest torchrun round among them (nodeloss.lost_node)."""
        ages: dict[str, list[float]] = {}
        rounds: dict[str, int] = {}
        for rank, record in self.view.records(0.9 * POLL_S).items():
            node = record.get("node")
            if record.get("phase") == "done" or not isinstance(node, str):
                continue
            ages.setdefault(node, []).append(self._fresh.age(("rank", rank), record.get("written"), now))
            round_ = record.get("round")
            round_ = round_ if isinstance(round_, int) and not isinstance(round_, bool) and 0 <= round_ < 2**31 else 0
            rounds[node] = min(rounds.get(node, round_), round_)
        return ages, rounds

    def _claim(self, lost: LostVerdict) -> bool:
        """Only one node records the event: the one that creates node-lost.json."""
        marker = self.layout.node_lost_marker(self.attempt)
        try:
            fd = safeio.open_fd(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            return False
        record = {"t": time.time(), "node": lost.node, "node_rank": lost.node_rank, "by": self.node, "why": lost.why}
        with os.fdopen(fd, "w") as out:
            json.dump(record, out)
        return True


def network_beat(address: str | None) -> Prober | None:
    """This node's network beat on `address` (None: no address to watch, as on the local backend's loopback)."""
    if not address:
        return None
    try:
        return Prober(address)
    except OSError:  # the address is not this node's: no network beat, the heartbeat still watches it
        return None


def seconds(value: object) -> float | None:
    """A duration from a heartbeat (untrusted): a finite number >= 0, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)  # an int beyond a float's range raises: it killed the peer watch's thread
    except OverflowError:
        return None
    return number if 0 <= number < float("inf") else None
