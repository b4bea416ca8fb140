"""The spec's `notify:` block: its checks (one line naming the key, the value and what is allowed) and what
each recorded event is worth telling (ddpctl.run.notify.about, pure)."""

from __future__ import annotations

from typing import Any

import pytest

from ddpctl.errors import SpecError
from ddpctl.run.history import Decided, Hung, NodeLost, RunHistory, StragglerFlagged
from ddpctl.run.notify import about
from ddpctl.spec import RequeuePolicy, spec_from_mapping, spec_to_mapping

BASE = {"name": "n", "script": "train.py", "backend": "local"}


def notify(block: Any) -> Any:
    return spec_from_mapping({**BASE, "notify": block}, check_paths=False).notify


def test_a_full_block_is_kept_and_round_trips() -> None:
    block = {
        "on": ["failure", "hang"], "webhook_env": "SLACK_HOOK", "webhook_format": "slack", "command": ["/bin/x", "-v"],
        "mail_to": ["a@example.org", "b@example.org"], "mail_from": "ddpctl@example.org",
        "smtp_host": "mail.example.org:2525", "timeout_s": 5,
    }  # fmt: skip
    got = notify(block)
    assert (got.on, got.webhook_env, got.webhook_format, got.command) == (
        ("failure", "hang"), "SLACK_HOOK", "slack", ("/bin/x", "-v"),
    )  # fmt: skip
    assert got.channels == ["webhook", "command", "mail"] and got.timeout_s == 5
    spec = spec_from_mapping({**BASE, "notify": block}, check_paths=False)
    assert spec_from_mapping(spec_to_mapping(spec), check_paths=False).notify == got


def test_without_a_block_nothing_is_sent() -> None:
    assert spec_from_mapping(BASE, check_paths=False).notify.channels == []


MAIL = {"mail_to": "a@b.org"}
SMTP = {**MAIL, "smtp_host": "mail.example.org"}
LOGIN = {**SMTP, "smtp_tls": "starttls", "smtp_user": "ops", "smtp_password_env": "RELAY_PASSWORD"}


def test_smtp_tls_and_login_are_kept_and_the_port_follows_the_tls_mode() -> None:
    from ddpctl.spec.notify import smtp_port

    got = notify({**LOGIN, "smtp_ca_file": "~/ca.pem"})
    assert (got.smtp_tls, got.smtp_user, got.smtp_password_env, got.smtp_ca_file) == (
        "starttls", "ops", "RELAY_PASSWORD", "~/ca.pem",
    )  # fmt: skip
    spec = spec_from_mapping({**BASE, "notify": LOGIN}, check_paths=False)
    assert spec_from_mapping(spec_to_mapping(spec), check_paths=False).notify == spec.notify
    assert [smtp_port("h", tls) for tls in ("none", "starttls", "ssl")] == [("h", 25), ("h", 587), ("h", 465)]
    assert smtp_port("h:2525", "ssl") == ("h", 2525)
    plain_local = notify({**MAIL, "smtp_host": "localhost", "smtp_user": "ops", "smtp_password_file": "/p"})
    assert plain_local.smtp_tls == "none", "a login without TLS is allowed to this machine's own relay"


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({}, "<spec>: notify: no channel: set webhook_env or webhook_file, command, or mail_to"),
        ({"webhook_url": "https://hooks.slack.com/x"}, "<spec>: notify.webhook_url: a webhook URL is a secret"),
        ({"webhook_env": "1BAD"}, "<spec>: notify.webhook_env: got '1BAD', expected a string matching"),
        ({"webhook_env": "A", "webhook_file": "/f"}, "<spec>: notify.webhook_file: set webhook_env or webhook_file"),
        ({"webhook_env": "A", "webhook_format": "teams"}, "<spec>: notify.webhook_format: got 'teams', expected one"),
        ({"webhook_env": "A", "on": ["done"]}, "<spec>: notify.on.0: got 'done', expected one of finish, failure,"),
        ({"webhook_env": "A", "on": ["hang", "hang"]}, "<spec>: notify.on: got ['hang', 'hang'], expected each"),
        ({"mail_to": ["not-an-address"]}, "<spec>: notify.mail_to.0: got 'not-an-address', expected a mail address"),
        ({"mail_from": "a@b.org"}, "<spec>: notify.mail_from: mail_to is not set"),
        ({"mail_to": "a@b.org", "smtp_host": "h:1", "sendmail": "/s"}, "<spec>: notify.smtp_host: set smtp_host or"),
        ({"mail_to": "a@b.org", "smtp_host": "h;rm -rf"}, "<spec>: notify.smtp_host: got 'h;rm -rf', expected"),
        ({"command": ["x"], "timeout_s": 0}, "<spec>: notify.timeout_s: got 0, expected an integer in 1..60"),
        ({"command": "x"}, "<spec>: notify.command: got 'x' (a string), expected a list of strings"),
        ({"webhook": "x"}, "<spec>: notify.webhook: unknown key, did you mean"),
        (
            {**MAIL, "smtp_host": "h:99999"},
            "<spec>: notify.smtp_host: got 'h:99999', expected host[:port] with a port in 1..65535",
        ),
        (
            {**MAIL, "smtp_host": "h", "smtp_tls": "tls"},
            "<spec>: notify.smtp_tls: got 'tls', expected one of none, starttls, ssl",
        ),
        ({**MAIL, "smtp_tls": "ssl"}, "<spec>: notify.smtp_tls: got 'ssl', expected it only with smtp_host (the relay"),
        (
            {**MAIL, "sendmail": "/s", "smtp_user": "ops"},
            "<spec>: notify.smtp_user: got 'ops', expected it only with smtp_host",
        ),
        (
            {**MAIL, "smtp_host": "h", "smtp_password": "hunter2"},
            "<spec>: notify.smtp_password: a password is a secret: put it in an environment variable",
        ),
        (
            {**SMTP, "smtp_user": "ops"},
            "<spec>: notify.smtp_user: got 'ops', expected a user with a password: set smtp_password_env",
        ),
        (
            {**SMTP, "smtp_password_env": "P"},
            "<spec>: notify.smtp_password_env: got 'P', expected it only with smtp_user",
        ),
        (
            {**LOGIN, "smtp_password_file": "/f"},
            "<spec>: notify.smtp_password_file: set smtp_password_env or smtp_password_file, not both",
        ),
        (
            {**LOGIN, "smtp_password_env": "1P"},
            "<spec>: notify.smtp_password_env: got '1P', expected a string matching",
        ),
        ({**LOGIN, "smtp_user": "a b"}, "<spec>: notify.smtp_user: got 'a b', expected a string matching"),
        (
            {**LOGIN, "smtp_tls": "none"},
            "<spec>: notify.smtp_tls: got 'none', expected starttls or ssl: a login to mail.example.org would send",
        ),
        (
            {**SMTP, "smtp_ca_file": "/ca.pem"},
            "<spec>: notify.smtp_ca_file: got '/ca.pem', expected it only with smtp_tls: starttls or ssl",
        ),
        ("yes", "<spec>: notify: got 'yes' (a string), expected a mapping with keys on, "),
    ],
)
def test_bad_blocks_fail_with_one_line(block: Any, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        notify(block)
    assert str(info.value).startswith(expected), str(info.value)
    assert "\n" not in str(info.value)
    assert "hunter2" not in str(info.value), "a password written in the spec is never echoed"


POLICY = RequeuePolicy(max_preemptions=2, max_node_failures=1)


def requeue(attempt: int, kind: str) -> dict[str, Any]:
    return {"event": "decision", "t": 1.0, "attempt": attempt, "action": "requeue", "kind": kind}


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([{"event": "decision", "attempt": 0, "action": "finish", "exit_code": 0}], "finish"),
        ([{"event": "decision", "attempt": 0, "action": "finish", "exit_code": 1}], "failure"),
        ([requeue(0, "preemption")], None),  # one of two preemptions used
        ([requeue(0, "preemption"), requeue(1, "preemption")], "last-requeue"),
        ([requeue(0, "preemption"), requeue(1, "node_failure")], "last-requeue"),  # max_node_failures: 1
        ([requeue(0, "node_failure"), requeue(1, "preemption")], None),
    ],
)
def test_which_decision_is_worth_telling(records: list[dict[str, Any]], expected: str | None) -> None:
    past = RunHistory.from_records(records)
    assert about(past.events[-1], past, POLICY) == expected


def test_hangs_and_lost_nodes_are_told_stragglers_are_not() -> None:
    past = RunHistory(())
    assert about(Hung(attempt=0), past, POLICY) == "hang"
    assert about(NodeLost(attempt=0, node="n1"), past, POLICY) == "node-lost"
    assert about(StragglerFlagged(attempt=0, rank=1), past, POLICY) is None
    assert about(Decided(attempt=0, action="requeue"), past, POLICY) is None
