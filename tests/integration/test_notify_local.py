"""Notifications (spec `notify:`) of real local-backend runs, received by a webhook server on loopback and a
minimal SMTP server (tests/smtptools.py; smtpd is gone from 3.12): a run that finishes and one that fails are
told; a webhook that hangs or answers 500, a mail host that is down and a relay that refuses the password neither
delay the run nor go unrecorded."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from clitools import REPO, Cli, events, example_spec, write_spec
from smtptools import Relay, serving

pytestmark = pytest.mark.torchrun
FAILING = "import sys\nprint('failing on purpose', flush=True)\nsys.exit(3)\n"


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server: Any = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        server.received.append(json.loads(body))
        if server.mode == "hang":
            time.sleep(20)
        self.send_response(500 if server.mode == "500" else 200)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[Any]:
    servers = []

    def start(mode: str = "ok") -> Any:
        server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        server.received, server.mode, server.daemon_threads = [], mode, True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        server.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/secret-token-123"
        return server

    yield start
    for server in servers:
        server.shutdown()


@pytest.fixture
def smtp() -> Iterator[Relay]:
    with serving(Relay()) as relay:
        yield relay


def cli_with(tmp_path: Path, **env: str) -> Cli:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty), **env})


def failing_spec(tmp_path: Path, name: str, notify: dict[str, Any]) -> Path:
    script = tmp_path / "fail.py"
    script.write_text(FAILING)
    return write_spec(
        tmp_path / f"{name}.yaml", name=name, script=str(script), nodes=1, nproc_per_node=1, backend="local",
        run_dir=str(tmp_path / "runs"), notify=notify,
    )  # fmt: skip


def wait(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def subject(mail: Message) -> str:
    return str(mail["Subject"])


def test_a_finished_and_a_failed_run_are_told_by_webhook_and_mail(tmp_path: Path, hook: Any, smtp: Any) -> None:
    receiver = hook()
    cli = cli_with(tmp_path, HOOK_URL=receiver.url)
    block = {"webhook_env": "HOOK_URL", "mail_to": ["ops@example.org"], "smtp_host": smtp.host}
    done_id, done_dir = cli.submit(example_spec(tmp_path, "told", notify=block))
    failed_id, failed_dir = cli.submit(failing_spec(tmp_path, "toldfail", {**block, "webhook_format": "slack"}))
    assert cli.wait_terminal(failed_id)["state"] == "FAILED"
    assert cli.wait_terminal(done_id)["state"] == "COMPLETED"
    wait(lambda: len(receiver.received) == 2 and len(smtp.mails) == 2)
    generic = next(r for r in receiver.received if "event" in r)
    assert (generic["event"], generic["name"], generic["job"]) == ("finish", "told", done_id)
    assert generic["text"].startswith(f"ddpctl: told (job {done_id}) finished")
    slack = next(r for r in receiver.received if "event" not in r)
    assert list(slack) == ["text"] and slack["text"].startswith(f"ddpctl: toldfail (job {failed_id}) failed (exit")
    subjects = sorted(subject(m) for m in smtp.mails)
    assert subjects[0].startswith("ddpctl: told (job") and "finished" in subjects[0]
    assert "toldfail" in subjects[1] and "failed" in subjects[1]
    assert all(m["To"] == "ops@example.org" for m in smtp.mails)
    assert json.loads(smtp.mails[0].get_payload(decode=True))["run_dir"] in (str(done_dir), str(failed_dir))
    for run_dir, job in ((done_dir, done_id), (failed_dir, failed_id)):
        assert not [e for e in events(run_dir) if e["event"] == "notify-failed"]
        shown = cli.run("status", job, "--json").stdout + cli.run("render", str(run_dir / "job.yaml")).stdout
        assert "secret-token-123" not in shown


def test_a_hanging_or_failing_channel_never_delays_the_run_and_is_recorded(tmp_path: Path, hook: Any) -> None:
    hanging, erring = hook("hang"), hook("500")
    cli = cli_with(tmp_path, HANG_URL=hanging.url, ERR_URL=erring.url)
    hang_id, hang_dir = cli.submit(failing_spec(tmp_path, "hanghook", {"webhook_env": "HANG_URL", "timeout_s": 1}))
    down = {"webhook_env": "ERR_URL", "mail_to": ["a@example.org"], "smtp_host": "127.0.0.1:1", "timeout_s": 1}
    err_id, err_dir = cli.submit(failing_spec(tmp_path, "errhook", down))
    for job, run_dir in ((hang_id, hang_dir), (err_id, err_dir)):
        assert cli.wait_terminal(job)["state"] == "FAILED"
        decided = next(e for e in events(run_dir) if e["event"] == "decision")
        pid_file = run_dir / "supervisor.pid"
        pid = int(pid_file.read_text().split()[0])
        wait(lambda pid=pid: not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), timeout=10)
        assert time.time() - decided["t"] < 8, "the supervisor waited for the notification"
    wait(lambda: len([e for e in events(hang_dir) if e["event"] == "notify-failed"]) == 1, timeout=30)
    wait(lambda: len([e for e in events(err_dir) if e["event"] == "notify-failed"]) == 2, timeout=30)
    (hung,) = [e for e in events(hang_dir) if e["event"] == "notify-failed"]
    assert (hung["channel"], hung["about"]) == ("webhook", "failure") and "timed out" in hung["error"]
    failed = {e["channel"]: e for e in events(err_dir) if e["event"] == "notify-failed"}
    assert "500" in failed["webhook"]["error"] and "refused" in failed["mail"]["error"].lower()
    assert len(hanging.received) == 2 and len(erring.received) == 2, "each channel is tried twice"
    assert not any("secret-token-123" in json.dumps(e) for e in events(hang_dir) + events(err_dir))


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_unset_secret_is_recorded_not_fatal(tmp_path: Path) -> None:
    cli = cli_with(tmp_path)
    job, run_dir = cli.submit(failing_spec(tmp_path, "nosecret", {"webhook_env": "NOT_SET_ANYWHERE", "timeout_s": 1}))
    assert cli.wait_terminal(job)["state"] == "FAILED"
    wait(lambda: any(e["event"] == "notify-failed" for e in events(run_dir)), timeout=30)
    (failed,) = [e for e in events(run_dir) if e["event"] == "notify-failed"]
    assert "NOT_SET_ANYWHERE" in failed["error"] and "not set" in failed["error"]
    assert os.environ.get("NOT_SET_ANYWHERE") is None


def test_mail_through_a_relay_that_wants_starttls_and_a_login(tmp_path: Path) -> None:
    """Two failing runs mail through one relay on loopback (STARTTLS with a self-signed certificate, AUTH): the
    one with the right password (from the job's environment) is delivered, the wrong one is recorded as
    notify-failed and its run ends as it would have; the password is in no event, status, render or spec copy."""
    with serving(Relay(tls="starttls", auth=("ops", "right-pa55")), tmp_path) as relay:
        cli = cli_with(tmp_path, RELAY_OK="right-pa55", RELAY_BAD="wrong-pa55")
        block = {"mail_to": ["ops@example.org"], "smtp_host": relay.host, "smtp_tls": "starttls",
                 "smtp_user": "ops", "smtp_ca_file": str(tmp_path / "relay-cert.pem"), "timeout_s": 5}  # fmt: skip
        good_id, good_dir = cli.submit(failing_spec(tmp_path, "relayok", {**block, "smtp_password_env": "RELAY_OK"}))
        bad_id, bad_dir = cli.submit(failing_spec(tmp_path, "relaybad", {**block, "smtp_password_env": "RELAY_BAD"}))
        assert cli.wait_terminal(good_id)["state"] == cli.wait_terminal(bad_id)["state"] == "FAILED"
        wait(lambda: any(e["event"] == "notify-failed" for e in events(bad_dir)), timeout=60)
        wait(lambda: len(relay.mails) == 1)
    (mail,) = relay.mails
    assert "relayok" in subject(mail) and "failed" in subject(mail) and mail["To"] == "ops@example.org"
    assert ("PLAIN", "ops", True) in relay.logins and ("PLAIN", "ops", False) in relay.logins
    assert not [e for e in events(good_dir) if e["event"] == "notify-failed"]
    (refused,) = [e for e in events(bad_dir) if e["event"] == "notify-failed"]
    assert (refused["channel"], refused["about"]) == ("mail", "failure") and "535" in refused["error"]
    for run_dir, job in ((good_dir, good_id), (bad_dir, bad_id)):
        shown = cli.run("status", job, "--json").stdout + cli.run("render", str(run_dir / "job.yaml")).stdout
        shown += (run_dir / "events.jsonl").read_text() + (run_dir / "job.yaml").read_text()
        assert "pa55" not in shown and "smtp_password_env: RELAY_" in shown
