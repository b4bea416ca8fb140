"""Mail through an SMTP relay that wants TLS and a login: the sender (ddpctl.run.notifysend) against a real server on
loopback (tests/smtptools.py) that checks the password, offers STARTTLS or speaks implicit TLS with a self-signed
certificate. A wrong password, a relay without STARTTLS and an untrusted certificate are recorded, never lost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from smtptools import Relay, serving

from ddpctl.run import notifysend
from ddpctl.run.layout import RunLayout
from ddpctl.spec import spec_from_mapping

NOTICE = {"event": "failure", "text": "ddpctl: n (job 7) failed (exit 3)", "name": "n", "job": "7", "attempt": 0}
SECRET = "s3cret-pa55-word"  # noqa: S105 - the relay's test password


@pytest.fixture(autouse=True)
def no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notifysend, "RETRY_AFTER_S", 0.0)


@pytest.fixture
def relay(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Relay]:
    with serving(request.param, tmp_path) as running:
        yield running


def send(tmp_path: Path, relay: Relay, env: dict[str, str] | None = None, **block: Any) -> list[dict[str, Any]]:
    """Send NOTICE through `block` (mail to ops@example.org via `relay`); the notify-failed events it recorded."""
    full = {"mail_to": ["ops@example.org"], "smtp_host": relay.host, "timeout_s": 5, **block}
    spec = spec_from_mapping({"name": "n", "script": "t.py", "notify": full}, check_paths=False)
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir(exist_ok=True)
    notifysend.send_all(layout, spec.notify, dict(NOTICE), env or {})
    lines = layout.events.read_text().splitlines() if layout.events.exists() else []
    return [json.loads(line) for line in lines]


def ca(tmp_path: Path) -> str:
    return str(tmp_path / "relay-cert.pem")  # self-signed: the certificate is its own CA


AUTHED = ("ops", SECRET)


@pytest.mark.parametrize("relay", [Relay(tls="starttls", auth=AUTHED)], indirect=True)
def test_starttls_and_auth_plain_with_the_password_from_the_environment(tmp_path: Path, relay: Relay) -> None:
    env = {"RELAY_PASSWORD": SECRET}
    block = {"smtp_tls": "starttls", "smtp_user": "ops", "smtp_password_env": "RELAY_PASSWORD"}
    assert send(tmp_path, relay, env, smtp_ca_file=ca(tmp_path), **block) == []
    assert relay.logins == [("PLAIN", "ops", True)]
    (mail,) = relay.mails
    assert mail["To"] == "ops@example.org" and str(mail["Subject"]).startswith("ddpctl: n (job 7) failed")


@pytest.mark.parametrize("relay", [Relay(tls="ssl", auth=AUTHED, mechanisms="LOGIN")], indirect=True)
def test_implicit_tls_and_auth_login_with_the_password_from_a_file(tmp_path: Path, relay: Relay) -> None:
    secret = tmp_path / "relay-password"
    secret.write_text(SECRET + "\n")  # a trailing newline, as an editor writes it, is not part of the password
    secret.chmod(0o600)
    block = {"smtp_tls": "ssl", "smtp_user": "ops", "smtp_password_file": str(secret), "smtp_ca_file": ca(tmp_path)}
    assert send(tmp_path, relay, None, **block) == []
    assert relay.logins == [("LOGIN", "ops", True)] and len(relay.mails) == 1


@pytest.mark.parametrize("relay", [Relay(auth=AUTHED)], indirect=True)
def test_a_login_without_tls_to_a_relay_on_this_machine(tmp_path: Path, relay: Relay) -> None:
    assert send(tmp_path, relay, {"P": SECRET}, smtp_user="ops", smtp_password_env="P") == []  # noqa: S106
    assert relay.logins == [("PLAIN", "ops", True)] and len(relay.mails) == 1


@pytest.mark.parametrize("relay", [Relay(tls="starttls", auth=AUTHED)], indirect=True)
def test_a_wrong_password_is_recorded_without_the_password(tmp_path: Path, relay: Relay) -> None:
    block = {"smtp_tls": "starttls", "smtp_user": "ops", "smtp_password_env": "P", "smtp_ca_file": ca(tmp_path)}
    (failed,) = send(tmp_path, relay, {"P": "wrong-" + SECRET}, **block)
    assert (failed["event"], failed["channel"], failed["about"]) == ("notify-failed", "mail", "failure")
    assert "SMTPAuthenticationError" in failed["error"] and "535" in failed["error"]
    assert SECRET not in json.dumps(failed)
    tried = [("PLAIN", "ops", False), ("LOGIN", "ops", False)]  # smtplib tries each mechanism the relay offers
    assert relay.logins == tried * 2 and relay.mails == [], "two tries, no mail"


@pytest.mark.parametrize("relay", [Relay(auth=AUTHED)], indirect=True)
def test_starttls_asked_of_a_relay_without_it_never_sends_in_clear(tmp_path: Path, relay: Relay) -> None:
    block = {"smtp_tls": "starttls", "smtp_user": "ops", "smtp_password_env": "P"}
    (failed,) = send(tmp_path, relay, {"P": SECRET}, **block)
    assert "STARTTLS extension not supported" in failed["error"]
    assert relay.logins == [] and relay.mails == []


@pytest.mark.parametrize("relay", [Relay(tls="ssl", auth=AUTHED)], indirect=True)
def test_an_untrusted_certificate_is_refused(tmp_path: Path, relay: Relay) -> None:
    (failed,) = send(tmp_path, relay, {"P": SECRET}, smtp_tls="ssl", smtp_user="ops", smtp_password_env="P")  # noqa: S106
    assert "CERTIFICATE_VERIFY_FAILED" in failed["error"] and relay.logins == []


@pytest.mark.parametrize("relay", [Relay(auth=AUTHED)], indirect=True)
def test_an_unset_password_variable_is_named(tmp_path: Path, relay: Relay) -> None:
    (failed,) = send(tmp_path, relay, smtp_user="ops", smtp_password_env="RELAY_PASSWORD_UNSET")  # noqa: S106
    assert "RELAY_PASSWORD_UNSET (notify.smtp_password_env) is not set here" in failed["error"]
    assert relay.logins == []
