"""ddpctl.node.worker: real child processes, real signals, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_worker(
    tmp_path: Path, body: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "scripts" / "job.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(textwrap.dedent(body))
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DDPCTL_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ddpctl.node.worker", str(script), *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def test_plain_run_behaves_like_python_script(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "helper.py").write_text("VALUE = 42\n")
    body = """
        import sys
        import helper  # importable because the script's directory is sys.path[0]
        print("argv", sys.argv[1:], helper.VALUE, __name__, "torch" in sys.modules)
    """
    result = run_worker(tmp_path, body, "--flag", "x y")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "argv ['--flag', 'x y'] 42 __main__ False\n"


@pytest.mark.parametrize(
    ("body", "status", "stderr_has"),
    [
        ("raise SystemExit(3)", 3, ""),
        ("import sys; sys.exit('fatal: bad input')", 1, "fatal: bad input"),
        ("raise SystemExit(None)", 0, ""),
        ("raise ValueError('boom')", 1, "ValueError: boom"),
        ("raise KeyboardInterrupt", 1, "KeyboardInterrupt"),
    ],
)
def test_exit_status_propagates(tmp_path: Path, body: str, status: int, stderr_has: str) -> None:
    result = run_worker(tmp_path, body)
    assert result.returncode == status
    assert stderr_has in result.stderr


def test_a_scripts_exit_message_is_its_recorded_error(tmp_path: Path) -> None:
    env = {
        "DDPCTL_RANK_LOG_PATTERN": str(tmp_path / "run" / "attempt-0" / "rank-{rank}.log"),
        "DDPCTL_RUN_DIR": str(tmp_path / "run"),
        "RANK": "2",
        "DDPCTL_ATTEMPT": "0",
    }
    result = run_worker(tmp_path, "import sys; sys.exit('fatal: no data in /scratch/x')", env=env)
    assert result.returncode == 1
    records = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [(r["event"], r["rank"], r["status"], r["error"]) for r in records] == [
        ("rank-exit", 2, 1, "SystemExit: fatal: no data in /scratch/x")
    ]


def test_missing_script_and_no_args_are_usage_errors(tmp_path: Path) -> None:
    assert subprocess.run([sys.executable, "-m", "ddpctl.node.worker"], cwd=REPO, check=False).returncode == 2
    missing = subprocess.run(
        [sys.executable, "-m", "ddpctl.node.worker", str(tmp_path / "nope.py")], cwd=REPO, check=False
    )
    assert missing.returncode == 2


def test_rank_log_is_appended_and_captures_both_streams(tmp_path: Path) -> None:
    pattern = str(tmp_path / "attempt-0" / "rank-{rank}.log")
    env = {"DDPCTL_RANK_LOG_PATTERN": pattern, "RANK": "3", "DDPCTL_ATTEMPT": "0"}
    body = """
        import os, sys
        print("to stdout")
        print("to stderr", file=sys.stderr)
        os.write(1, b"raw fd write\\n")
        raise SystemExit(5)
    """
    first = run_worker(tmp_path, body, env=env)
    second = run_worker(tmp_path, body, env=env)
    assert (first.returncode, second.returncode) == (5, 5)
    assert first.stdout == first.stderr == ""
    text = (tmp_path / "attempt-0" / "rank-3.log").read_text()
    assert text.count("to stdout\n") == 2
    assert text.count("to stderr\n") == 2
    assert text.count("raw fd write\n") == 2
    assert text.count("[ddpctl.worker] rank=3 attempt=0") == 2


WAIT_FOR_FLAG = """
    import os, signal, sys, time
    from pathlib import Path
    from ddpctl.runtime import stopflag
    {trigger}
    deadline = time.monotonic() + 5
    while not stopflag.stop_requested() and time.monotonic() < deadline:
        time.sleep(0.01)
    print(stopflag.stop_requested(), stopflag.stop_source())
"""


def test_stop_signal_sets_the_flag_without_killing(tmp_path: Path) -> None:
    body = WAIT_FOR_FLAG.format(trigger="os.kill(os.getpid(), signal.SIGUSR2)")
    result = run_worker(tmp_path, body, env={"DDPCTL_STOP_SIGNAL": "USR2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "True signal:SIGUSR2\n"


def test_stop_file_sets_the_flag_within_the_poll_interval(tmp_path: Path) -> None:
    stop = tmp_path / "stop-node-0"
    body = WAIT_FOR_FLAG.format(trigger=f"Path({str(stop)!r}).touch()")
    result = run_worker(tmp_path, body, env={"DDPCTL_STOP_FILE": str(stop)})
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"True file:{stop}\n"


def test_without_launcher_variables_nothing_is_armed(tmp_path: Path) -> None:
    body = """
        import signal
        from ddpctl.runtime import stopflag
        print(signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL, stopflag._FLAG.watcher is None)
    """
    result = run_worker(tmp_path, body)
    assert result.stdout == "True True\n"


def test_exit_joins_threads_and_runs_atexit_before_leaving(tmp_path: Path) -> None:
    body = """
        import atexit, threading, time
        atexit.register(lambda: print("atexit ran", flush=True))
        threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", flush=True))).start()
        raise SystemExit(4)
    """
    result = run_worker(tmp_path, body)
    assert result.returncode == 4
    assert result.stdout == "thread done\natexit ran\n"


def test_unknown_stop_signal_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    result = run_worker(tmp_path, "print('ran')", env={"DDPCTL_STOP_SIGNAL": "NOPE"})
    assert result.returncode == 0
    assert result.stdout == "ran\n"
    assert "DDPCTL_STOP_SIGNAL='NOPE' is not a signal" in result.stderr


@pytest.mark.parametrize("planted", ["rank-0.log", "rank-0.json"])
def test_worker_never_writes_through_a_symlink_in_the_run_dir(tmp_path: Path, planted: str) -> None:
    attempt = tmp_path / "run" / "attempt-0"
    attempt.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (attempt / planted).symlink_to(victim)
    done = run_worker(
        tmp_path, "print('hello')\n", env={"DDPCTL_RANK_LOG_PATTERN": str(attempt / "rank-{rank}.log"), "RANK": "0"}
    )
    assert victim.read_text() == "precious\n"
    if planted == "rank-0.log":
        assert done.returncode == 2
        assert done.stderr.strip().endswith(
            "rank-0.log: is a symbolic link, refused (run-dir files are never followed through links)"
        )
    else:  # the placement file is replaced atomically: the link itself goes, its target stays untouched
        assert done.returncode == 0 and not (attempt / planted).is_symlink()
