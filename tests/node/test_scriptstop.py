"""requeue.script_signal in the worker wrapper: real worker processes, real signals, real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from ddpctl.node.scriptstop import newest_checkpoint

REPO = Path(__file__).resolve().parents[2]

# A tutorial-style script: its own handler sets a flag, the loop saves its own checkpoint and exits 0. It plays
# the launcher too (creates the stop file) once its handler is in place, so nothing depends on timing.
OWN_CHECKPOINT = """
    import os, signal, sys, time
    from pathlib import Path
    stop = []
    signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
    Path(os.environ["DDPCTL_STOP_FILE"]).touch()
    for step in range(1, 300):
        time.sleep(0.01)
        if stop:
            Path(os.environ["DDPCTL_CKPT_DIR"], "checkpoint.pt").write_text(str(step))
            print("saved", step, "restart", os.environ["DDPCTL_RESTART_COUNT"], flush=True)
            sys.exit(0)
    print("never stopped", flush=True)
"""


def run_worker(tmp_path: Path, body: str, **extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    run_dir = tmp_path / "run"
    (run_dir / "ckpt").mkdir(parents=True)
    (run_dir / "attempt-0").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPCTL_")}
    env.update(
        DDPCTL_RUN_DIR=str(run_dir),
        DDPCTL_ATTEMPT="0",
        DDPCTL_RESTART_COUNT="0",
        RANK="0",
        DDPCTL_CKPT_DIR=str(run_dir / "ckpt"),
        DDPCTL_STOP_FILE=str(run_dir / "attempt-0" / "stop-node-0"),
        DDPCTL_STOP_SIGNAL="USR2",
        DDPCTL_STOP_LEAD_S="8",
        **extra,
    )
    done = subprocess.run(
        [sys.executable, "-m", "ddpctl.node.worker", str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    return done, run_dir


def test_script_signal_reaches_the_scripts_handler_and_its_clean_exit_is_a_stop(tmp_path: Path) -> None:
    done, run_dir = run_worker(tmp_path, OWN_CHECKPOINT, DDPCTL_SCRIPT_SIGNAL="USR1")
    assert done.returncode == 0, done.stderr
    assert "saved" in done.stdout and "restart 0" in done.stdout, done.stdout
    assert "sending SIGUSR1 to the script (its own handler)" in done.stdout, done.stdout
    marker = json.loads((run_dir / "attempt-0" / "stopped.json").read_text())
    assert marker["source"] == "script" and marker["checkpoint"] == str(run_dir / "ckpt" / "checkpoint.pt")
    assert marker["signal_time"] is not None and marker["checkpoint_mtime"] >= marker["signal_time"] - 1
    listen = json.loads((run_dir / "attempt-0" / "listen-rank-0.json").read_text())
    assert listen["how"] == "script handler for SIGUSR1", listen
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["source"]) for e in events] == [("stop", "script")], events


def test_without_a_handler_the_script_signal_has_its_default_action(tmp_path: Path) -> None:
    body = """
        import os, time
        from pathlib import Path
        Path(os.environ["DDPCTL_STOP_FILE"]).touch()
        time.sleep(30)
        print("survived", flush=True)
    """
    done, run_dir = run_worker(tmp_path, body, DDPCTL_SCRIPT_SIGNAL="USR1")
    assert done.returncode == -signal.SIGUSR1, (done.returncode, done.stdout, done.stderr)
    assert "survived" not in done.stdout and not (run_dir / "attempt-0" / "stopped.json").exists()
    assert not (run_dir / "attempt-0" / "listen-rank-0.json").exists()


def test_without_script_signal_a_clean_exit_after_a_stop_is_not_a_stop(tmp_path: Path) -> None:
    # The old behaviour stays for scripts that did not ask: the stop flag is set, nothing is sent, no marker.
    done, run_dir = run_worker(tmp_path, OWN_CHECKPOINT)
    assert done.returncode == 0, done.stderr
    assert "never stopped" in done.stdout and "sending" not in done.stdout, done.stdout
    assert not (run_dir / "attempt-0" / "stopped.json").exists()


def test_newest_checkpoint_is_the_most_recently_written_visible_entry(tmp_path: Path) -> None:
    assert newest_checkpoint(tmp_path / "missing") is None
    assert newest_checkpoint(tmp_path) is None
    for name, mtime in (("a.pt", 100), ("b.pt", 300), (".tmp-c.pt", 900), ("c.pt", 200)):
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (mtime, mtime))
    assert newest_checkpoint(tmp_path) == {"path": str(tmp_path / "b.pt"), "mtime": 300.0}


def test_a_script_that_finishes_before_its_handler_exists_has_completed_not_stopped(tmp_path: Path) -> None:
    # The stop arrives, the script never installs a handler and simply ends its training within the grace:
    # that is a completed run, and must not be requeued (which would restart a plain script from scratch).
    body = """
        import os, time
        from pathlib import Path
        Path(os.environ["DDPCTL_STOP_FILE"]).touch()
        time.sleep(0.5)
        print("done", flush=True)
    """
    done, run_dir = run_worker(tmp_path, body, DDPCTL_SCRIPT_SIGNAL="USR1")
    assert done.returncode == 0 and "done" in done.stdout, (done.stdout, done.stderr)
    assert not (run_dir / "attempt-0" / "stopped.json").exists()


def test_a_polling_script_acknowledges_by_deleting_the_stop_file(tmp_path: Path) -> None:
    body = """
        import os, time
        from pathlib import Path
        stop = Path(os.environ["DDPCTL_STOP_FILE"])
        stop.touch()  # plays the launcher
        while stop.exists():
            time.sleep(1.0)  # the worker's watcher sees it first (0.2 s polls), then the script does
            if stop.exists():
                Path(os.environ["DDPCTL_CKPT_DIR"], "latest.pt").write_text("saved")
                stop.unlink(missing_ok=True)
    """
    done, run_dir = run_worker(tmp_path, body)
    assert done.returncode == 0, done.stderr
    marker = json.loads((run_dir / "attempt-0" / "stopped.json").read_text())
    assert marker["source"] == "script" and marker["checkpoint"].endswith("latest.pt"), marker


# Rank 0 of a DDP script whose peers' handlers got the signal: the script agrees to stop across ranks, so rank 0
# saves and exits 0 before its own forwarder (behind a 0.2 s stop-file watcher) has sent it anything. The stop
# file is never created here, so rank 0's forwarder never fires: only the peer's record can tell.
RANK0_STOPPED_BY_PEERS = """
    import os, signal, sys
    from pathlib import Path
    signal.signal(signal.SIGUSR1, lambda *_: None)
    Path(os.environ["DDPCTL_CKPT_DIR"], "checkpoint.pt").write_text("12")
    print("stopping at step 12 for requeue", flush=True)
    sys.exit(0)
"""


def peer_listens(tmp_path: Path, how: str) -> None:
    """Play rank 1 of the same attempt: its listen-rank file, as announce_listener writes it."""
    peer = tmp_path / "run" / "attempt-0" / "listen-rank-1.json"
    peer.parent.mkdir(parents=True)
    peer.write_text(json.dumps({"rank": 1, "how": how, "time": 1.0}) + "\n")


def test_rank0_leaving_before_its_forwarder_is_a_stop_when_a_peers_handler_got_the_signal(tmp_path: Path) -> None:
    peer_listens(tmp_path, "script handler for SIGUSR1")
    done, run_dir = run_worker(tmp_path, RANK0_STOPPED_BY_PEERS, DDPCTL_SCRIPT_SIGNAL="USR1", WORLD_SIZE="4")
    assert done.returncode == 0, done.stderr
    assert "sending" not in done.stdout, done.stdout  # rank 0's own forwarder never fired
    marker = json.loads((run_dir / "attempt-0" / "stopped.json").read_text())
    assert marker["source"] == "script" and marker["checkpoint"].endswith("checkpoint.pt"), marker
    assert marker["signal_time"] == 1.0, marker  # rank 0 never saw the stop: the peer's handler time stands in


def test_rank0_clean_exit_without_any_handler_getting_the_signal_is_completed(tmp_path: Path) -> None:
    # A peer that listens through ddpctl.runtime, not through the script's handler: no evidence of a script stop.
    peer_listens(tmp_path, "ddpctl.runtime")
    done, run_dir = run_worker(tmp_path, RANK0_STOPPED_BY_PEERS, DDPCTL_SCRIPT_SIGNAL="USR1", WORLD_SIZE="4")
    assert done.returncode == 0, done.stderr
    assert not (run_dir / "attempt-0" / "stopped.json").exists()
