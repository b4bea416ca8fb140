"""proc: the one place commands start and signal names become signals."""

from __future__ import annotations

import signal
import sys

import pytest

from ddpctl import proc


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
