"""The nodes' network beat (issue 26, a cut link): the cut-off verdict as a literal table, the heartbeat's fields as
untrusted input, and the prober for real on loopback."""

from __future__ import annotations

import socket
import time

import pytest

from ddpctl.health.nodeloss import CUT_S, LostVerdict, cut_off
from ddpctl.health.peers import seconds
from ddpctl.health.probe import Prober, parse_endpoint

NAMES = {0: "n0", 1: "n1", 2: "n2", 3: "n3"}
LONG = CUT_S + 1


@pytest.mark.parametrize(
    ("unreachable", "nodes", "expected"),
    [
        ({0: None, 1: None, 2: None}, 3, None),
        # n1 cut off: n0 cannot reach it, it cannot reach n2; n2 reaches n0.
        (
            {0: LONG, 1: LONG, 2: None},
            3,
            LostVerdict(
                1,
                "n1",
                f"cut off from the others' network: n0 has not reached it for {LONG:.0f} s, nor it n2 for {LONG:.0f} s",
                LONG,
            ),
        ),
        # The ring wraps: n0 cut off is reported by the last node and by itself.
        (
            {0: LONG, 1: None, 2: LONG},
            3,
            LostVerdict(
                0,
                "n0",
                f"cut off from the others' network: n2 has not reached it for {LONG:.0f} s, nor it n1 for {LONG:.0f} s",
                LONG,
            ),
        ),
        ({0: CUT_S - 1, 1: LONG, 2: None}, 3, None),  # not long enough on one side
        ({0: LONG, 1: None, 2: None}, 3, None),  # one failing probe alone blames nobody (n1 may be busy starting)
        ({0: LONG, 2: None}, 3, None),  # n1 said nothing (left, or no network beat): no verdict on it
        (
            {0: LONG, 1: LONG},
            2,
            LostVerdict(
                None,
                None,
                f"n0 and n1 have not reached each other for {LONG:.0f} s; which one's link is down cannot be told",
                LONG,
            ),
        ),
        ({0: LONG, 1: None}, 2, None),
        ({0: LONG}, 1, None),
        (
            {0: None, 1: None, 2: LONG, 3: LONG},
            4,
            LostVerdict(
                3,
                "n3",
                f"cut off from the others' network: n2 has not reached it for {LONG:.0f} s, nor it n0 for {LONG:.0f} s",
                LONG,
            ),
        ),
    ],
)
def test_the_node_cut_off_is_the_one_its_neighbours_lost_both_ways(
    unreachable: dict[int, float | None], nodes: int, expected: LostVerdict | None
) -> None:
    assert cut_off(unreachable, NAMES, nodes) == expected


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("10.99.0.14:40000", ("10.99.0.14", 40000)),
        ("10.99.0.14:0", None),
        ("10.99.0.14:70000", None),
        ("10.99.0.14", None),
        ("node4:40000", None),  # names are not resolved from a heartbeat
        ("1.2.3:40", None),
        ("[::1]:40", None),
        (40000, None),
        (None, None),
    ],
)
def test_a_heartbeat_endpoint_is_taken_only_as_an_ipv4_address_and_port(
    endpoint: object, expected: tuple[str, int] | None
) -> None:
    assert parse_endpoint(endpoint) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(3, 3.0), (2.5, 2.5), (0, 0.0), (-1, None), (True, None), ("5", None), (float("nan"), None)]
)
def test_a_heartbeat_duration_is_a_finite_number(value: object, expected: float | None) -> None:
    assert seconds(value) == expected


def test_the_prober_counts_how_long_the_next_node_refuses_and_forgets_it_once_it_answers() -> None:
    alive, prober = Prober("127.0.0.1"), Prober("127.0.0.1")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening: connections are refused
    alive.start()
    prober.start()
    try:
        prober.aim(alive.endpoint)
        time.sleep(2.5)
        assert prober.unreachable_s() is None
        prober.aim(dead)
        deadline = time.monotonic() + 10
        while (prober.unreachable_s() or 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (prober.unreachable_s() or 0) >= 2
        prober.aim(alive.endpoint)  # a new target starts afresh
        assert prober.unreachable_s() is None
    finally:
        prober.stop()
        alive.stop()
        closed.close()
