"""Rank output cannot drive the terminal or forge a prefix through `ddpctl logs` (issue 10 #12)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_logs_support import append, make_attempt

from ddpctl.run.registry import JobRecord, Registry
from ddpctl.sanitize import visible, visible_lines

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # write "rm -rf ~" to the clipboard
TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J\x1b[H"
FORGED = "\r[a0 node1 r0] all good, rank 0 here"  # rank 3 pretending to be rank 0


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, tabs\tstay", "plain text, tabs\tstay"),
        (OSC52, "^[]52;c;cm0gLXJmIH4=^G"),
        (CLEAR, "^[[2J^[[H"),
        ("progress\r50%", "progress^M50%"),
        ("nul\x00 del\x7f bs\x08", "nul^@ del^? bs^H"),
        ("c1 csi \x9b2J", "c1 csi <U+009B>2J"),
        ("bidi \u202eevil\u202c", "bidi <U+202E>evil<U+202C>"),
        ("ünïcödé ✓ 日本", "ünïcödé ✓ 日本"),
    ],
)
def test_visible(text: str, shown: str) -> None:
    assert visible(text) == shown
    assert visible_lines(["ok", text]) == ["ok", shown]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "evil" / "9"
    attempt = make_attempt(run_dir, 0, {"node1": [0, 1], "node2\x1b[31m": [2, 3]})
    for rank in range(3):
        append(attempt / f"rank-{rank}.log", f"r{rank} fine\n".encode())
    append(
        attempt / "rank-3.log",
        f"{OSC52}{TITLE}{CLEAR}{FORGED}\nTraceback (most recent call last):\nRuntimeError: bad{OSC52}\n".encode(),
    )
    Registry(tmp_path).add(JobRecord("9", "evil", str(run_dir), "local", 1.0, final_state="FAILED"))
    return tmp_path


def logs(home: Path, *args: str, color: bool = False) -> subprocess.CompletedProcess[str]:
    """Output decoded without newline translation: text mode would turn a raw \r into \n and hide it."""
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    env.pop("FORCE_COLOR", None)
    env.pop("NO_COLOR", None)
    if color:
        env["FORCE_COLOR"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "ddpctl", "logs", "evil", *args], env=env, capture_output=True, timeout=30, check=False
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def our_colours_removed(text: str) -> str:
    """ddpctl's own SGR colour codes (ESC [ digits/; m) are fine; anything else with ESC is not."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.mark.parametrize("args", [(), ("--no-color",), ("--errors",), ("--errors", "--json"), ("--json",)])
@pytest.mark.parametrize("color", [False, True])
def test_no_control_character_reaches_the_terminal(home: Path, args: tuple[str, ...], color: bool) -> None:
    done = logs(home, *args, color=color)
    assert done.returncode == 0, done.stderr
    for stream in (done.stdout, done.stderr):
        cleaned = our_colours_removed(stream)
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", cleaned), repr(stream)
    if "--json" in args:  # JSON escapes them itself, and the text still holds exactly what the rank wrote
        texts = [json.loads(line)["text"] for line in done.stdout.splitlines()]
        assert any(OSC52 in text for text in texts)
    else:
        assert "^[]52;c;" in our_colours_removed(done.stdout + done.stderr)


def test_a_carriage_return_cannot_forge_another_ranks_line(home: Path) -> None:
    out = logs(home, "--no-color").stdout.splitlines()
    forged = [line for line in out if "all good, rank 0 here" in line]
    assert len(forged) == 1 and forged[0].startswith("[a0 node2^[[31m r3] ") and "^M[a0 node1 r0]" in forged[0]


def test_raw_passes_bytes_through(home: Path) -> None:
    done = logs(home, "--no-color", "--raw")
    assert OSC52 in done.stdout and FORGED in done.stdout


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain\ttab", "plain\ttab"),
        ("esc\x1b[2J", "esc^[[2J"),
        ("del\x7f", "del^?"),
        ("nul\x00", "nul^@"),
        ("caf\u00e9", "caf\u00e9"),
        ("csi\u009b", "csi<U+009B>"),
        ("bidi\u202e", "bidi<U+202E>"),
    ],
)
def test_ascii_fast_path_and_unicode_path_agree(text: str, shown: str) -> None:
    from ddpctl.sanitize import visible, visible_lines

    assert visible(text) == shown
    assert visible_lines(["ok", text]) == ["ok", shown]
