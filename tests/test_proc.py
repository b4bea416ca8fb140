"""proc: the one place commands start and signal names become signals."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from ddpctl import proc
from ddpctl.errors import CommandError, CommandTimeout


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("USR2", signal.SIGUSR2),
        ("SIGUSR1", signal.SIGUSR1),
        (" usr2 ", signal.SIGUSR2),
        ("12", signal.SIGUSR2),
        ("URG", signal.SIGURG),
        ("ALRM", signal.SIGALRM),
        ("TERM", signal.SIGTERM),
    ],
)
def test_signal_named(name: str, expected: signal.Signals) -> None:
    assert proc.signal_named(name) is expected


def test_signal_named_refuses_an_unknown_name() -> None:
    with pytest.raises(KeyError):
        proc.signal_named("NOPE")


def test_spawn_starts_without_waiting_and_passes_the_env() -> None:
    child = proc.spawn(
        [sys.executable, "-c", "import os, sys; sys.exit(int(os.environ['CODE']))"],
        env={"CODE": "7"},
        stdin=proc.DEVNULL,
    )
    assert child.wait(timeout=60) == 7


def test_concurrently_overlaps_the_calls_and_keeps_their_order() -> None:
    started = time.monotonic()

    def after(seconds: float, value: str) -> str:
        time.sleep(seconds)
        return value

    results = proc.concurrently(lambda: after(0.3, "a"), lambda: after(0.3, "b"), lambda: "c")
    assert results == ["a", "b", "c"]
    assert time.monotonic() - started < 0.55  # not 0.6: the two waits overlapped


def test_concurrently_raises_the_first_calls_error_after_all_ended() -> None:
    ended: list[str] = []

    def slow_ok() -> None:
        time.sleep(0.2)
        ended.append("slow")

    def fail(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match="first"):
        proc.concurrently(slow_ok, lambda: fail("first"), lambda: fail("second"))
    assert ended == ["slow"]
    assert proc.concurrently() == []


def test_in_background_runs_beside_the_caller_and_hands_back_its_value() -> None:
    import threading

    started_here = threading.Event()

    def call() -> str:
        # Only returns once the caller has gone on past in_background(): the two run at the same time.
        if not started_here.wait(timeout=10):
            raise AssertionError("the caller was blocked while the call ran")
        return "facts"

    pending = proc.in_background(call)
    started_here.set()
    assert pending.result() == "facts"


def test_in_background_raises_the_calls_error_at_result() -> None:
    def call() -> None:
        raise CommandError("sinfo failed: down")

    pending = proc.in_background(call)
    with pytest.raises(CommandError, match="sinfo failed: down"):
        pending.result()


def test_run_capped_holds_no_more_than_its_limit_of_an_answer() -> None:
    """A remote answer was read whole (subprocess capture) before its size bound applied."""
    talker = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    started = time.monotonic()
    with pytest.raises(proc.OutputTooBig, match="said more than 1048576 bytes"):
        proc.run_capped(talker, limit=1 << 20, timeout=30)
    assert time.monotonic() - started < 20  # stopped, not read to its end (it has none)
    done = proc.run_capped([sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1])"], data=b"abc", limit=64)
    assert (done.returncode, done.stdout, done.stderr) == (0, "cba\n", "")
    noisy = [sys.executable, "-c", "import sys; sys.stderr.write('e' * 100); sys.exit(3)"]
    with pytest.raises(proc.OutputTooBig):
        proc.run_capped(noisy, limit=50)
    assert proc.run_capped(noisy, limit=100).returncode == 3
    with pytest.raises(CommandTimeout):
        proc.run_capped([sys.executable, "-c", "import time; time.sleep(30)"], limit=10, timeout=0.5)


def test_run_bounded_keeps_the_last_bytes_and_kills_a_shells_children_at_its_timeout() -> None:
    chatty = proc.run_bounded(["/bin/sh", "-c", "seq 1 20000; echo last >&2; exit 3"], keep=100, timeout=30)
    assert chatty.returncode == 3
    assert chatty.tail.endswith(b"19999\n20000\nlast\n") and len(chatty.tail) == 100
    assert chatty.dropped == len(b"".join(b"%d\n" % i for i in range(1, 20001))) + 5 - 100
    started = time.monotonic()
    # The sleep is the shell's child, not the shell: only the group's kill ends it (and frees the pipe).
    hung = proc.run_bounded(["/bin/sh", "-c", "echo started; sleep 30; echo never"], keep=1000, timeout=1)
    assert (hung.returncode, hung.tail) == (None, b"started\n")
    assert time.monotonic() - started < 10
    with pytest.raises(CommandError, match="command not found"):
        proc.run_bounded(["no-such-command-anywhere"], keep=10, timeout=1)
