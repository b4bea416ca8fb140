"""`ddpctl logs` end to end: the real CLI in a subprocess against a registry in a temporary DDPCTL_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_logs_support import append, make_attempt

from ddpctl.run.registry import JobRecord, Registry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "train" / "123"
    make_attempt(run_dir, 0, {"node1": [0, 1], "node2": [2, 3]})
    for r in range(4):
        append(run_dir / "attempt-0" / f"rank-{r}.log", f"a0 r{r} hello\n".encode())
    a1 = make_attempt(run_dir, 1, {"node2": [0, 1], "node1": [2, 3]})
    for r in range(4):
        append(a1 / f"rank-{r}.log", f"a1 r{r} step 1\na1 r{r} loss 0.5\n".encode())
    append(a1 / "rank-3.log", b'Traceback (most recent call last):\n  File "t.py"\nValueError: bad lr\n')
    add_record(tmp_path, final_state="COMPLETED")
    return tmp_path


def add_record(home: Path, **fields: object) -> None:
    run_dir = home / "runs" / "train" / "123"
    Registry(home).add(JobRecord("123", "train", str(run_dir), "local", 1.0, **fields))  # type: ignore[arg-type]


def ddpctl(home: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "ddpctl", "logs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_latest_attempt_plain(home: Path) -> None:
    proc = ddpctl(home, "train", "--rank", "0,3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[a1 node2 r0] a1 r0 step 1",
        "[a1 node2 r0] a1 r0 loss 0.5",
        "[a1 node1 r3] a1 r3 step 1",
        "[a1 node1 r3] a1 r3 loss 0.5",
        "[a1 node1 r3] Traceback (most recent call last):",
        '[a1 node1 r3]   File "t.py"',
        "[a1 node1 r3] ValueError: bad lr",
    ]
    assert "\x1b[" not in proc.stdout  # not a terminal: no colour


def test_all_attempts_with_grep_and_node(home: Path) -> None:
    proc = ddpctl(home, "123", "--attempt", "all", "--node", "node1", "--grep", r"hello|loss")
    assert proc.stdout.splitlines() == [
        "-- attempt 0 --",
        "[a0 node1 r0] a0 r0 hello",
        "[a0 node1 r1] a0 r1 hello",
        "-- attempt 1 --",
        "[a1 node1 r2] a1 r2 loss 0.5",
        "[a1 node1 r3] a1 r3 loss 0.5",
    ]


def test_tail_shows_the_last_lines_under_their_attempt(home: Path) -> None:
    """Issue 45: no `logs --tail N`."""
    proc = ddpctl(home, "train", "--rank", "0,3", "--tail", "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[a1 node1 r3] Traceback (most recent call last):",
        '[a1 node1 r3]   File "t.py"',
        "[a1 node1 r3] ValueError: bad lr",
    ]
    proc = ddpctl(home, "123", "--attempt", "all", "--node", "node1", "--grep", r"hello|loss", "--tail", "3")
    assert proc.stdout.splitlines() == [
        "-- attempt 0 --",  # the banner of the attempt the first kept line belongs to
        "[a0 node1 r1] a0 r1 hello",
        "-- attempt 1 --",
        "[a1 node1 r2] a1 r2 loss 0.5",
        "[a1 node1 r3] a1 r3 loss 0.5",
    ]
    assert ddpctl(home, "train", "--tail", "100").stdout == ddpctl(home, "train").stdout


def test_json_lines(home: Path) -> None:
    proc = ddpctl(home, "123", "--json", "--attempt", "0", "--rank", "2")
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [
        {"attempt": 0, "node": "node2", "rank": 2, "text": "a0 r2 hello"},
    ]


def test_errors(home: Path) -> None:
    proc = ddpctl(home, "123", "--errors")
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "[a1 node1 r3] line 3: ValueError: bad lr",
        "-- first failure in attempt 1: rank 3 on node1, line 3 (earliest non-NCCL error, 1 of 4 ranks failed): "
        "ValueError: bad lr --",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuchjob"], "job 'nosuchjob': no such job id or name"),
        (["123", "--rank", "9"], "--rank: rank 9 is outside the job's world size 4; allowed: 0-3"),
        (["123", "--rank", "1-x"], "--rank '1-x': bad item '1-x'; allowed:"),
        (["123", "--grep", "(unclosed"], "--grep '(unclosed': not a valid regular expression"),
        (["123", "--attempt", "7"], "--attempt 7: this job has no such attempt; allowed: 0, 1 or 'all'"),
        (["123", "--node", "node9"], "--node: no node 'node9' in this job (did you mean 'node"),
        (["123", "--errors", "-f"], "--errors: cannot be combined with -f"),
        (["123", "--tail", "5", "-f"], "--tail: cannot be combined with -f"),
        (["123", "--tail", "0"], "--tail '0': expected a number of lines from 1 to 10000000"),
    ],
)
def test_bad_input_exits_2_with_one_line(home: Path, args: list[str], message: str) -> None:
    proc = ddpctl(home, *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("ddpctl: error: ")
    assert message in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_follow_a_finished_job_drains_and_names_the_state(home: Path) -> None:
    append(home / "runs" / "train" / "123" / "attempt-1" / "rank-0.log", b"last words, no newline")
    proc = ddpctl(home, "123", "-f", "--rank", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["[a1 node2 r0] last words, no newline", "-- job 123 COMPLETED --"]


def test_follow_live_across_a_requeue_until_the_registry_says_done(home: Path) -> None:
    # The record says RUNNING (no scheduler involved); a later registry line with a terminal final_state ends -f.
    add_record(home, final_state="RUNNING")
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    follower = subprocess.Popen(
        [sys.executable, "-m", "ddpctl", "logs", "123", "-f", "--rank", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The requeue comes once the follower is following attempt 1 (a fixed sleep lost that race under load).
        assert follower.stdout is not None
        first = [follower.stdout.readline(), follower.stdout.readline()]
        a2 = make_attempt(home / "runs" / "train" / "123", 2, {"node3": [0, 1]})
        append(a2 / "rank-1.log", b"a2 r1 resumed\n")
        time.sleep(1.0)
        add_record(home, final_state="COMPLETED")
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert "".join(first).splitlines() + out.splitlines() == [
        "[a1 node2 r1] a1 r1 step 1",
        "[a1 node2 r1] a1 r1 loss 0.5",
        "-- attempt 2 --",
        "[a2 node3 r1] a2 r1 resumed",
        "-- job 123 COMPLETED --",
    ]


def test_broken_pipe_is_quiet(home: Path) -> None:
    log = home / "runs" / "train" / "123" / "attempt-1" / "rank-0.log"
    append(log, b"".join(b"line %d\n" % i for i in range(200_000)))
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    proc = subprocess.run(  # noqa: S602 (the pipe into head is the point)
        f"{sys.executable} -m ddpctl logs 123 | head -n 2",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.stdout.splitlines() == ["[a1 node2 r0] a1 r0 step 1", "[a1 node2 r0] a1 r0 loss 0.5"]
    assert proc.stderr == ""


def test_colour_when_forced(home: Path) -> None:
    env = {**os.environ, "DDPCTL_HOME": str(home), "FORCE_COLOR": "1"}
    env.pop("NO_COLOR", None)
    run = [sys.executable, "-m", "ddpctl", "logs", "123", "--rank", "0"]
    coloured = subprocess.run(run, env=env, capture_output=True, text=True, timeout=30, check=True).stdout
    plain = subprocess.run([*run, "--no-color"], env=env, capture_output=True, text=True, timeout=30, check=True).stdout
    assert "\x1b[" in coloured and "\x1b[" not in plain
    assert coloured.splitlines()[0].endswith("[a1 node2 r0]\x1b[0m a1 r0 step 1")


def test_errors_as_json(home: Path) -> None:
    proc = ddpctl(home, "123", "--errors", "--json")
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [
        {"attempt": 1, "node": "node1", "rank": 3, "text": "ValueError: bad lr", "line": 3, "collateral": False},
    ]
    assert proc.stderr.startswith("-- first failure in attempt 1: rank 3")


def test_job_without_attempts_says_so(tmp_path: Path) -> None:
    Registry(tmp_path).add(
        JobRecord("9", "queued", str(tmp_path / "runs" / "queued" / "9"), "local", 1.0, final_state="CANCELLED")
    )
    proc = ddpctl(tmp_path, "queued")
    assert proc.returncode == 0
    assert proc.stdout.startswith("-- job 9: no attempt has started yet")
    follow = ddpctl(tmp_path, "queued", "-f")
    assert (follow.returncode, follow.stdout) == (0, "-- job 9 CANCELLED --\n")
