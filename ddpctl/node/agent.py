"""`python -m ddpctl.node.agent ENDPOINT TORCHRUN_ARGS...`: torchrun, entered through ddpctl.

On a node that is not the rendezvous host (ENDPOINT is ``host:port``; ``-`` on the host and on one node),
it waits, after importing torch and before torchrun connects, until the host's store accepts connections.
Why: torch's store client, refused, backs off 0.3-0.6 s (exponential with jitter, no setting) before it tries
again, and whichever node imports torch faster than the host's agent starts listening loses that, at random,
on about half of all multi-node starts. A 10 ms connect poll costs nothing and never loses more than 10 ms.

The wait is bounded (AWAIT_S); past it, or when the host's name does not resolve, torchrun runs exactly as
it would have, and its own connect retries and timeouts report what is wrong. The process is torchrun
itself afterwards (torch's ``main`` runs in it), so signals, exit codes and output are torchrun's.
"""

from __future__ import annotations

import socket
import sys
import time

AWAIT_S = 60.0  # as long as torchrun's own store connect timeout (read_timeout, 60 s by default)
POLL_S = 0.01


def parse_endpoint(text: str) -> tuple[str, int] | None:
    """``host:port`` -> (host, port); ``-`` (nothing to wait for) -> None."""
    if text == "-":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"endpoint {text!r}: expected HOST:PORT or -")
    return host, int(port)


def await_listener(host: str, port: int, deadline_s: float = AWAIT_S, poll_s: float = POLL_S) -> str | None:
    """Wait until HOST:PORT accepts a connection (closed at once): None then, else why it stopped waiting."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"cannot resolve {host}: {exc.strerror or exc}"
    end = time.monotonic() + deadline_s
    while True:
        for family, kind, proto, _name, address in infos:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(max(0.05, min(1.0, end - time.monotonic())))
                try:
                    sock.connect(address)
                except OSError:
                    continue
                return None
        if time.monotonic() >= end:
            return f"{host}:{port} did not accept connections within {deadline_s:g} s"
        time.sleep(poll_s)


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m ddpctl.node.agent HOST:PORT|- TORCHRUN_ARGS...")
    endpoint = parse_endpoint(argv[0])
    # torch first: importing it is the slow part of torchrun's start, and the host's agent imports it too.
    from torch.distributed import run

    if endpoint and (why := await_listener(*endpoint)):
        # torchrun then runs as it would have, and its own retries and timeouts report what is wrong
        print(f"ddpctl: not waiting for the rendezvous host: {why}; torchrun connects on its own", file=sys.stderr)
        sys.stderr.flush()
    run.main(argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
