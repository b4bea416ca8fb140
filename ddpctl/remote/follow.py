"""`logs [-f] --cluster NAME`: the cluster's ddpctl reads the run dir and prints JSON lines; they are shown here
through the same sinks as local logs (so rank output is made visible here, before the terminal).

A dropped connection is reconnected, and the output continues from the last line printed, no line twice. The
resumable position is the count of lines printed per (attempt, rank): a rank's log is only ever appended to,
so the remote `logs` run again prints each source's lines in the same order, and the first `count` of each
are the ones already shown (`Resume`). Reconnecting re-reads the logs there; no state is kept on the cluster.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ddpctl.errors import RemoteError
from ddpctl.logs.core import Source
from ddpctl.logs.output import Sink
from ddpctl.remote.check import install_hint
from ddpctl.remote.ssh import SSH_FAILED, command_missing
from ddpctl.remote.transport import Transport
from ddpctl.sanitize import visible

RECONNECT_S = 60.0  # how long a dropped follow keeps trying to reconnect
RECONNECT_PAUSE_S = 0.5
MAX_LINE = 1 << 20
NEVER_CONNECTED = ("unreachable", "auth", "hostkey-changed", "hostkey-unknown")  # said at once, not retried


@dataclass
class Resume:
    """Which lines of a repeated remote `logs` are new: per source, those beyond the count printed."""

    printed: dict[tuple[int, int], int] = field(default_factory=dict)
    received: dict[tuple[int, int], int] = field(default_factory=dict)

    def restart(self) -> None:
        self.received = {}

    def fresh(self, attempt: int, rank: int) -> bool:
        key = (attempt, rank)
        count = self.received.get(key, 0) + 1
        self.received[key] = count
        if count > self.printed.get(key, 0):
            self.printed[key] = count
            return True
        return False


@dataclass(frozen=True)
class Line:
    source: Source
    text: str
    time: float | None


def parse(raw: bytes) -> Line | None:
    """One JSON line of the remote `logs --json -t`; None for anything else (it is not shown raw)."""
    try:
        data = json.loads(raw[:MAX_LINE])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    attempt, rank, node, text, when = (data.get(k) for k in ("attempt", "rank", "node", "text", "time"))
    if not (isinstance(attempt, int) and isinstance(rank, int) and isinstance(text, str)):
        return None
    node = node if isinstance(node, str) else None
    return Line(Source(attempt, node, rank), text, when if isinstance(when, (int, float)) else None)


def forward_stderr(stream: object, said: list[str]) -> threading.Thread:
    """The remote's notes (stderr) shown here as they come, made visible; the last kept for an error line."""

    def pump() -> None:
        for raw in stream:  # type: ignore[attr-defined]
            line = raw.decode(errors="replace").rstrip("\n")
            said.append(line)
            if not line.startswith(("ddpctl: error:", "ssh:", "Connection to", "client_loop:")):
                print(visible(line), file=sys.stderr, flush=True)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def one_pass(transport: Transport, words: Sequence[str], sink: Sink, resume: Resume) -> tuple[int, str]:
    """Run the remote logs once: (its exit status, its stderr)."""
    resume.restart()
    proc = transport.spawn(words)
    said: list[str] = []
    pump = forward_stderr(proc.stderr, said)
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = parse(raw)
        if line is not None and resume.fresh(line.source.attempt, line.source.rank):
            sink.lines(line.source, [line.text], line.time)
            sink.flush()
    code = proc.wait()
    pump.join(timeout=5)
    return code, "\n".join(said)


def show(
    transport: Transport,
    words: Sequence[str],
    sink: Sink,
    local: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    reconnect_s: float = RECONNECT_S,
) -> int:
    """The remote logs shown through `sink`, reconnected while ssh fails for up to `reconnect_s`."""
    resume = Resume()
    lost_at: float | None = None
    while True:
        code, stderr = one_pass(transport, words, sink, resume)
        if code != SSH_FAILED:
            return answer(transport, code, stderr, local)
        if lost_at is None and not resume.printed and transport.failure(stderr).kind in NEVER_CONNECTED:
            raise transport.failure(stderr)  # no connection to lose: unreachable, refused, a wrong host key
        if resume.received or lost_at is None:  # lines came on this connection: the clock starts again
            lost_at = clock()
            cluster = transport.cluster
            lost = f"cluster {cluster.name!r}: the connection to {visible(cluster.ssh)} was lost"
            print(
                f"ddpctl: {lost}; reconnecting, then continuing after the last line shown", file=sys.stderr, flush=True
            )
        elif clock() - lost_at > reconnect_s:
            raise transport.failure(stderr)
        time.sleep(RECONNECT_PAUSE_S)


def answer(transport: Transport, code: int, stderr: str, local: str) -> int:
    if code == 0:
        return 0
    cluster = transport.cluster
    if command_missing(code, stderr):
        command = visible(" ".join(cluster.ddpctl))
        raise RemoteError(f"cluster {cluster.name!r}: no {command!r} on {visible(cluster.ssh)}: {install_hint(local)}")
    said = [line for line in stderr.splitlines() if line.strip()]
    last = visible(said[-1]).removeprefix("ddpctl: error: ") if said else f"exit status {code}"
    err = RemoteError(f"cluster {transport.cluster.name!r}: {last}")
    err.exit_code = code
    raise err
