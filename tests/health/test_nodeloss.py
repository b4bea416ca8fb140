"""The node-lost verdict (pure, literal tables) and the launchers' heartbeats on a real run dir (real threads)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ddpctl.health import nodeloss, peers
from ddpctl.health.nodeloss import Freshness, LostVerdict, PeerBeat, lost_node
from ddpctl.health.summary import JobView, Seat
from ddpctl.run import history
from ddpctl.run.history import NodeLost
from ddpctl.run.layout import RunLayout

ALIVE = PeerBeat(1.0, seen=True, done=False, node="n2")

# (peer beats by node rank, expected (node rank, node) or None)
CASES = [
    ({1: ALIVE}, None),
    ({1: PeerBeat(14.9, seen=True, done=False, node="n2")}, None),
    ({1: PeerBeat(15.1, seen=True, done=False, node="n2")}, (1, "n2")),
    ({1: PeerBeat(300.0, seen=True, done=True, node="n2")}, None),  # it left: never lost
    ({1: PeerBeat(59.0, seen=False, done=False)}, None),  # not up yet
    ({1: PeerBeat(61.0, seen=False, done=False)}, (1, None)),  # never came up
    ({1: ALIVE, 2: PeerBeat(20.0, seen=True, done=False, node="n3")}, (2, "n3")),
    ({1: PeerBeat(16.0, seen=True, done=False, node="n2"), 2: PeerBeat(30.0, seen=True, done=False)}, (1, "n2")),
]


@pytest.mark.parametrize(("beats", "expected"), CASES)
def test_lost_node_table(beats: dict[int, PeerBeat], expected: tuple[int, str | None] | None) -> None:
    found = lost_node(beats)
    assert (None if found is None else (found.node_rank, found.node)) == expected


def test_verdict_says_why_and_how_long() -> None:
    found = lost_node({1: PeerBeat(16.04, seen=True, done=False, node="n2")})
    assert found == LostVerdict(1, "n2", "its heartbeat stopped 16 s ago (allowed 15 s)", 16.0)


def test_freshness_counts_from_the_first_sight_of_a_value() -> None:
    fresh = Freshness(100.0)
    assert fresh.look(100.5) and fresh.age("a", 1, 100.5) == 0.0
    assert fresh.look(101.5) and fresh.age("a", 1, 101.5) == 1.0
    assert fresh.look(102.5) and fresh.age("a", 2, 102.5) == 0.0  # a new beat
    assert fresh.unseen_age(102.5) == 2.5


def test_freshness_restarts_after_a_gap_in_its_own_looks() -> None:
    # The reader was frozen or starved for 20 s: it cannot tell who stopped, so nobody is stale yet.
    fresh = Freshness(0.0)
    fresh.age("a", 1, 0.0)
    assert fresh.look(20.0) is False
    assert fresh.age("a", 1, 20.0) == 0.0 and fresh.unseen_age(20.0) == 0.0


def write_progress(layout: RunLayout, rank: int, node: str) -> None:
    record = {"rank": rank, "node": node, "phase": "train", "written": time.time(), "step": 1}
    layout.progress_file(0, rank).write_text(json.dumps(record))


def test_a_stopped_heartbeat_ends_the_attempt_and_one_node_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nodeloss, "LOST_S", 1.5)
    monkeypatch.setattr(nodeloss, "BEAT_S", 0.2)
    monkeypatch.setattr(peers, "POLL_S", 0.1)
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    ended: list[str] = []

    def ender(name: str) -> Callable[[], None]:
        return lambda: ended.append(name)

    watches = [
        peers.PeerWatch(JobView(Seat(layout, 0, f"n{r + 1}", r, 3)), end_attempt=ender(f"n{r + 1}")) for r in range(3)
    ]
    for watch in watches:
        watch.start()
    time.sleep(1.0)
    assert ended == []  # all alive: nothing happens however long they beat
    watches[2]._stop.set()  # node 3 dies: its thread stops, no last beat
    watches[2]._thread.join()
    deadline = time.monotonic() + 10
    while len(ended) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    for watch in watches[:2]:
        watch.stop()
    assert sorted(ended) == ["n1", "n2"]
    lost = [e for e in history.load(layout.events).events if isinstance(e, NodeLost)]
    assert [(e.node, e.node_rank, e.found_by in ("n1", "n2")) for e in lost] == [("n3", 2, True)]
    assert json.loads(layout.node_lost_marker(0).read_text())["node"] == "n3"
    assert json.loads(layout.node_beat(0, 0).read_text())["done"] is True


def test_a_node_that_left_is_not_lost_and_lingering_ends_when_all_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nodeloss, "LOST_S", 0.5)
    monkeypatch.setattr(peers, "POLL_S", 0.1)
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    ended: list[int] = []
    one = peers.PeerWatch(JobView(Seat(layout, 0, "n1", 0, 2)), end_attempt=lambda: ended.append(0))
    two = peers.PeerWatch(JobView(Seat(layout, 0, "n2", 1, 2)), end_attempt=lambda: ended.append(1))
    one.start()
    two.start()
    two.stop()  # n2's torchrun exited: its last beat says done
    time.sleep(1.5)
    started = time.monotonic()
    one.stop()
    one.linger()
    assert time.monotonic() - started < 1.0 and ended == [] and not layout.node_lost_marker(0).exists()


def test_lingering_after_a_crash_finds_the_dead_peer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A dead peer's reset connections crash this node's ranks first: the attempt's cause is still the lost node.
    monkeypatch.setattr(nodeloss, "LOST_S", 0.5)
    monkeypatch.setattr(peers, "POLL_S", 0.1)
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    one = peers.PeerWatch(JobView(Seat(layout, 0, "n1", 0, 2)), end_attempt=lambda: None)
    two = peers.PeerWatch(JobView(Seat(layout, 0, "n2", 1, 2)), end_attempt=lambda: None)
    two.beat()  # n2 beat once, then died
    one.start()
    one.stop()
    one.linger(bound_s=5.0)
    assert one.ended and json.loads(layout.node_lost_marker(0).read_text())["node"] == "n2"


def test_silent_ranks_of_a_node_whose_launcher_beats_are_no_lost_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46.3: n2's ranks stop writing (a GIL held in C code, a declared pause, torchrun restarting them) while
    n1's keep writing and n2's launcher beats: that is the watchdog's matter, never a lost node. Before, the ranks'
    silence alone (20 s against a fresh rank elsewhere) called n2 lost and ended a healthy attempt."""
    monkeypatch.setattr(peers, "POLL_S", 0.1)
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    one = peers.PeerWatch(JobView(Seat(layout, 0, "n1", 0, 2)), end_attempt=lambda: None)
    two = peers.PeerWatch(JobView(Seat(layout, 0, "n2", 1, 2)), end_attempt=lambda: None)
    write_progress(layout, 2, "n2")
    write_progress(layout, 3, "n2")
    clock = [1e9]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    for _ in range(40):  # 40 s by the readers' clock: twice the silence bound the ranks used to be judged by
        write_progress(layout, 0, "n1")  # n1's ranks write on, n2's stay silent ...
        two.beat()  # ... while n2's launcher beats
        assert not one.check()
        clock[0] += 1.0
    assert one.lost is None


def test_lingering_ends_as_soon_as_a_live_peer_beats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # This node's rank failed on its own and the peer is alive (its ranks hang or are about to fail): one beat of
    # the peer's tells, not LOST_S.
    monkeypatch.setattr(nodeloss, "BEAT_S", 0.2)
    monkeypatch.setattr(peers, "POLL_S", 0.1)
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    one = peers.PeerWatch(JobView(Seat(layout, 0, "n1", 0, 2)), end_attempt=lambda: None)
    two = peers.PeerWatch(JobView(Seat(layout, 0, "n2", 1, 2)), end_attempt=lambda: None)
    two.start()
    one.start()
    one.stop()
    started = time.monotonic()
    one.linger(bound_s=10.0)
    took = time.monotonic() - started
    two.stop()
    assert took < 2.0 and not one.ended and not layout.node_lost_marker(0).exists(), took


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (2.5, 2.5), (0, 0.0), (-1, None), (float("inf"), None), (float("nan"), None), (True, None),
     ("5", None), (None, None), (int("9" * 400), None)],
)  # fmt: skip
def test_a_duration_from_a_heartbeat_is_bounded(value: object, expected: float | None) -> None:
    assert peers.seconds(value) == expected


def test_a_beat_with_a_400_digit_duration_reads_as_none(tmp_path: Path) -> None:
    """A peer's beat file (the job can write it) with a huge `unreachable_s` killed the peer watch's thread."""
    layout = RunLayout(tmp_path)
    (tmp_path / "attempt-0").mkdir()
    beat = {"node": "n2", "node_rank": 1, "seq": 3, "done": False, "unreachable_s": int("9" * 400)}
    layout.node_beat(0, 1).write_text(json.dumps(beat))
    watch = peers.PeerWatch(JobView(Seat(layout, 0, "n1", 0, 2)), end_attempt=lambda: None)
    found = watch.peer_beats(time.monotonic())[1]
    assert (found.seen, found.node, found.unreachable_s) == (True, "n2", None)
