"""The nodes' network beat: can this node still open a connection to the next node, on the training network?

A node whose data network fails (a cut link, a dead NIC, a fabric port down) may still write its heartbeat to the
run dir (the shared filesystem can run over another network, and on the test cluster it is the host's own disk),
while every collective of every rank blocks without an error until the process-group timeout. So each launcher
also listens on a TCP port of the address the ranks' traffic uses (GLOO_SOCKET_IFNAME's), published in its
heartbeat, and connects once a second to the next node's (node rank + 1, in a ring: one connection per node per
second, whatever the job's size). Only the kernel answers a connection, so a busy or niced launcher does not make
its node look unreachable; a refused or timed-out connection does. How long the next node has been unreachable
goes into this node's heartbeat, and the verdict (ddpctl.health.nodeloss.cut_off) finds the node that neither its
predecessor reaches nor itself reaches its successor.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

PROBE_S = 1.0  # one connection attempt to the next node this often
CONNECT_TIMEOUT_S = 2.0
BACKLOG = 64


class Prober:
    """This node's listener and its probe of the next node (a thread each; daemon threads: they never hold the
    launcher's exit)."""

    def __init__(self, address: str) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((address, 0))
        self._listener.listen(BACKLOG)
        self.endpoint = f"{address}:{self._listener.getsockname()[1]}"
        self._target: tuple[str, int] | None = None
        self._failing_since: float | None = None
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._accept, name="ddpctl-probe-accept", daemon=True),
            threading.Thread(target=self._probe, name="ddpctl-probe", daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def aim(self, endpoint: str | None) -> None:
        """The next node's published endpoint (None: not known yet, or it publishes none): probe that."""
        target = parse_endpoint(endpoint)
        if target != self._target:
            self._target, self._failing_since = target, None

    def unreachable_s(self) -> float | None:
        """How long the next node has refused or timed out every connection (None: it answers, or not probed)."""
        since = self._failing_since
        return None if since is None else round(time.monotonic() - since, 1)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.close()

    def _probe(self) -> None:
        while not self._stop.wait(PROBE_S):
            target = self._target
            if target is None:
                continue
            started = time.monotonic()
            try:
                with socket.create_connection(target, timeout=CONNECT_TIMEOUT_S):
                    pass
            except OSError:
                if self._target == target and self._failing_since is None:
                    self._failing_since = started
                continue
            if self._target == target:
                self._failing_since = None


def parse_endpoint(endpoint: object) -> tuple[str, int] | None:
    """`host:port` from a heartbeat (untrusted): an IPv4 address and a port, or None."""
    if not isinstance(endpoint, str) or endpoint.count(":") != 1:
        return None
    host, _, port = endpoint.partition(":")
    try:
        socket.inet_aton(host)
    except OSError:
        return None
    if not port.isdigit() or not 0 < int(port) < 65536 or host.count(".") != 3:
        return None
    return host, int(port)
