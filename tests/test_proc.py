"""proc: the one place commands start and signal names become signals."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

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


def wait_for(child: proc.Forked, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while (code := child.poll()) is None:
        assert time.monotonic() < deadline, "the forked child did not end"
        time.sleep(0.01)
    return code


def forked(tmp_path: Path, main: Callable[[], int], env: dict[str, str] | None = None) -> tuple[int, str]:
    out = tmp_path / "out.log"
    with out.open("ab") as log:
        child = proc.fork_call(main, env=env or {"ONLY": "this"}, output_fd=log.fileno(), prepare=lambda: None)
        code = wait_for(child)
    return code, out.read_text()


def test_fork_call_runs_the_function_as_a_process_with_that_env_and_output(tmp_path: Path) -> None:
    def main() -> int:
        print("out", sorted(os.environ.items()))
        print("err", file=sys.stderr)
        return 3

    code, text = forked(tmp_path, main)
    assert code == 3
    assert sorted(text.splitlines()) == ["err", "out [('ONLY', 'this')]"]  # stdout is block-buffered, as in any process
    assert "ONLY" not in os.environ  # the parent's environment is its own


@pytest.mark.parametrize(
    ("exit_with", "expected"),
    [(None, 0), (0, 0), (7, 7), ("a message", 1)],
)
def test_fork_call_turns_system_exit_into_the_status(tmp_path: Path, exit_with: object, expected: int) -> None:
    def main() -> int:
        raise SystemExit(exit_with)

    assert forked(tmp_path, main)[0] == expected


def test_fork_call_prints_an_uncaught_exception_and_exits_1(tmp_path: Path) -> None:
    def main() -> int:
        raise RuntimeError("boom in the child")

    code, text = forked(tmp_path, main)
    assert code == 1 and "Traceback" in text and "RuntimeError: boom in the child" in text


def test_fork_call_child_is_signalled_and_reaped_like_a_popen(tmp_path: Path) -> None:
    ready = tmp_path / "ready"

    def main() -> int:
        ready.write_text("")
        time.sleep(60)
        return 0

    with (tmp_path / "out.log").open("ab") as log:
        child = proc.fork_call(main, env={}, output_fd=log.fileno(), prepare=lambda: None)
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.poll() is None
        child.send_signal(signal.SIGTERM)
        assert wait_for(child) == -signal.SIGTERM
        child.send_signal(signal.SIGTERM)  # already reaped: nothing to signal, no error


def test_fork_call_child_gets_prepare_and_none_of_the_parents_files(tmp_path: Path) -> None:
    held = os.open(tmp_path / "held", os.O_CREAT | os.O_WRONLY)
    previous = signal.signal(signal.SIGUSR2, lambda *_: None)

    def main() -> int:
        try:
            os.fstat(held)
        except OSError:
            return 0 if signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN else 2
        return 1

    try:
        out = tmp_path / "out.log"
        with out.open("ab") as log:
            prepare = lambda: signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # noqa: E731
            child = proc.fork_call(main, env={}, output_fd=log.fileno(), prepare=prepare)
            assert wait_for(child) == 0, out.read_text()
    finally:
        os.close(held)
        signal.signal(signal.SIGUSR2, previous)


def test_concurrently_overlaps_the_calls_and_keeps_their_order() -> None:
    started = time.monotonic()
    results = proc.concurrently(lambda: (time.sleep(0.3), "a")[1], lambda: (time.sleep(0.3), "b")[1], lambda: "c")
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
