"""ddpctl.node.agent: torchrun entered through ddpctl, waiting on other nodes for the rendezvous host's store."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ddpctl.node.agent import await_listener, parse_endpoint
from ddpctl.node.torchrun import awaited_endpoint
from ddpctl.slurm.env import DistEnv


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("-", None), ("n1:23456", ("n1", 23456)), ("10.0.0.1:29500", ("10.0.0.1", 29500)), ("[::1]:1", ("[::1]", 1))],
)
def test_endpoints_parse(text: str, parsed: tuple[str, int] | None) -> None:
    assert parse_endpoint(text) == parsed


@pytest.mark.parametrize("text", ["", "n1", ":1", "n1:", "n1:x", "n1:-1"])
def test_bad_endpoints_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected HOST:PORT or -"):
        parse_endpoint(text)


def dist(node_rank: int, nnodes: int) -> DistEnv:
    hosts = tuple(f"n{i + 1}" for i in range(nnodes))
    return DistEnv(
        master_addr="10.0.0.1",
        master_port=23456,
        node_rank=node_rank,
        nnodes=nnodes,
        nproc_per_node=2,
        world_size=2 * nnodes,
        rdzv_id="77.0",
        restart_count=0,
        job_id="77",
        node_name=hosts[node_rank],
        hosts=hosts,
    )


@pytest.mark.parametrize(
    ("node_rank", "nnodes", "awaited"),
    [(0, 1, "-"), (0, 2, "-"), (1, 2, "10.0.0.1:23456"), (63, 64, "10.0.0.1:23456")],
)
def test_every_node_but_the_host_waits_for_the_host(node_rank: int, nnodes: int, awaited: str) -> None:
    assert awaited_endpoint(dist(node_rank, nnodes)) == awaited


@contextmanager
def late_listener(after_s: float | None) -> Iterator[tuple[int, list[float]]]:
    """A loopback port, bound at once (so connects are refused, as before a store listens) and listening
    AFTER_S later (never if None); yields the port and a list that gets the time it started listening, then
    one entry (0.0) per connection it accepted."""
    accepted: list[float] = []
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        done = threading.Event()

        def serve() -> None:
            if after_s is None or done.wait(after_s):
                return
            accepted.append(time.monotonic())
            sock.listen(8)
            sock.settimeout(0.1)
            while not done.is_set():
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                accepted.append(0.0)
                conn.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield sock.getsockname()[1], accepted
        finally:
            done.set()
            thread.join(5)


def test_the_wait_ends_when_the_store_listens() -> None:
    # Dated before the listener's thread starts its 0.3 s wait: under load the thread may run ahead of
    # this test's next line, and a clock read after the `with` could land later than the listen.
    started = time.monotonic()
    with late_listener(0.3) as (port, accepted):
        assert await_listener("127.0.0.1", port, deadline_s=10) is None
        ended = time.monotonic()
    assert len(accepted) == 2 and started + 0.3 <= accepted[0] <= ended


def test_a_store_that_never_listens_ends_the_wait_with_the_reason() -> None:
    with late_listener(None) as (port, accepted):
        why = await_listener("localhost", port, deadline_s=0.3)
    assert why == f"localhost:{port} did not accept connections within 0.3 s" and not accepted


def test_the_agent_is_torchrun_after_the_wait(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real thing: waits for the port, then torch's own torchrun runs the command on one process."""
    marker = tmp_path / "ran"
    torchrun = ["--standalone", "--nproc-per-node=1", "--no-python", "touch", str(marker)]
    # Before the listener's thread starts its 0.5 s: taken inside, it could come a few hundred µs after that
    # thread's start and the bound below would miss by as much (seen once on a loaded 2-core run).
    started = time.monotonic()
    with late_listener(0.5) as (port, accepted):
        done = subprocess.run(
            [sys.executable, "-m", "ddpctl.node.agent", f"127.0.0.1:{port}", *torchrun],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert marker.exists() and len(accepted) == 2 and accepted[0] >= started + 0.5
    assert "not waiting" not in done.stderr
