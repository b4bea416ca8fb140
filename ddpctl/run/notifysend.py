"""The detached sender of one notice (`python -m ddpctl.run.notifysend RUN_DIR NOTICE_JSON`, ddpctl.run.notify).

Each channel of the run's spec `notify:` block gets the notice: a webhook (a generic JSON object, or Slack's
`{"text": ...}`), a command (the notice as JSON on its stdin), mail (the site's sendmail, or an SMTP host:
plain, STARTTLS or implicit TLS, with a login where the spec names a user).
Each gets `timeout_s` and one retry; a channel that still fails is recorded as a `notify-failed` event, whose
error never holds the webhook URL or the SMTP password (secrets: from the environment or a file, never printed).
"""

from __future__ import annotations

import json
import os
import shutil
import smtplib
import socket
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from ddpctl import proc, safeio
from ddpctl.run import history
from ddpctl.run.history import NotifyFailed
from ddpctl.run.layout import RunLayout
from ddpctl.spec.model import NotifySettings
from ddpctl.spec.notify import smtp_port

RETRY_AFTER_S = 2.0
MAX_URL_BYTES = 4096
MAX_PASSWORD_BYTES = 1024


class SendError(Exception):
    pass


def webhook_url(block: NotifySettings, env: Mapping[str, str]) -> str:
    if block.webhook_env:
        url = env.get(block.webhook_env, "").strip()
        if not url:
            raise SendError(f"environment variable {block.webhook_env} (notify.webhook_env) is not set here")
    else:
        assert block.webhook_file is not None
        data = safeio.read_bounded(Path(block.webhook_file).expanduser(), MAX_URL_BYTES)
        if not data:
            raise SendError(f"notify.webhook_file {block.webhook_file}: missing, empty or a symlink")
        url = data.decode(errors="replace").strip()
    if not url.startswith(("https://", "http://")):
        raise SendError("the webhook URL does not start with https:// or http://")
    return url


def send_webhook(block: NotifySettings, notice: dict[str, Any], env: Mapping[str, str]) -> None:
    url = webhook_url(block, env)
    body = {"text": notice["text"]} if block.webhook_format == "slack" else notice
    request = urllib.request.Request(  # noqa: S310 - the scheme is checked above: http(s) only
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=block.timeout_s) as answer:  # noqa: S310
            answer.read(4096)
    except Exception as err:  # the URL is a secret: the error says what happened, never where
        raise SendError(str(err).replace(url, "<webhook>")[:300]) from None


def send_command(block: NotifySettings, notice: dict[str, Any], _env: Mapping[str, str]) -> None:
    done = proc.run_capped(
        list(block.command), limit=1 << 16, data=json.dumps(notice).encode(), timeout=block.timeout_s
    )
    if done.returncode != 0:
        raise SendError(f"{block.command[0]} exited {done.returncode}: {done.stderr.strip()[-200:]}")


def send_mail(block: NotifySettings, notice: dict[str, Any], env: Mapping[str, str]) -> None:
    mail = EmailMessage()
    mail["Subject"] = notice["text"].splitlines()[0][:200]
    mail["From"] = block.mail_from or f"ddpctl@{socket.gethostname()}"
    mail["To"] = ", ".join(block.mail_to)
    mail.set_content(json.dumps(notice, indent=2) + "\n")
    if block.smtp_host:
        password = smtp_password(block, env)
        try:
            with smtp_session(block, password) as smtp:
                smtp.send_message(mail)
        except Exception as err:  # the password is a secret: the error says what happened, never the password
            text = f"{type(err).__name__}: {err}"
            raise SendError(text.replace(password, "<password>") if password else text) from None
        return
    sendmail = block.sendmail or shutil.which("sendmail") or "/usr/sbin/sendmail"
    done = proc.run_capped([sendmail, "-t", "-oi"], limit=1 << 16, data=mail.as_bytes(), timeout=block.timeout_s)
    if done.returncode != 0:
        raise SendError(f"{sendmail} exited {done.returncode}: {done.stderr.strip()[-200:]}")


def smtp_password(block: NotifySettings, env: Mapping[str, str]) -> str:
    """The relay's password, where the spec names a user ("" where it does not)."""
    if not block.smtp_user:
        return ""
    if block.smtp_password_env:
        password = env.get(block.smtp_password_env, "")
        if not password:
            raise SendError(
                f"environment variable {block.smtp_password_env} (notify.smtp_password_env) is not set here"
            )
        return password
    assert block.smtp_password_file is not None
    data = safeio.read_bounded(Path(block.smtp_password_file).expanduser(), MAX_PASSWORD_BYTES)
    password = data.decode(errors="replace").rstrip("\r\n") if data else ""
    if not password:
        raise SendError(f"notify.smtp_password_file {block.smtp_password_file}: missing, empty or a symlink")
    return password


def smtp_session(block: NotifySettings, password: str) -> smtplib.SMTP:
    """A connection to the relay, encrypted as the spec says (the certificate checked) and logged in."""
    assert block.smtp_host is not None
    host, port = smtp_port(block.smtp_host, block.smtp_tls)
    ca_file = str(Path(block.smtp_ca_file).expanduser()) if block.smtp_ca_file else None
    context = ssl.create_default_context(cafile=ca_file) if block.smtp_tls != "none" else None
    if block.smtp_tls == "ssl":
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=block.timeout_s, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=block.timeout_s)
    try:
        if block.smtp_tls == "starttls":
            smtp.starttls(context=context)  # refused by a relay that does not offer it: never sent in clear
        if block.smtp_user:
            smtp.login(block.smtp_user, password)
    except BaseException:
        smtp.close()
        raise
    return smtp


Sender = Callable[[NotifySettings, dict[str, Any], Mapping[str, str]], None]
SENDERS: dict[str, Sender] = {"webhook": send_webhook, "command": send_command, "mail": send_mail}


def send_all(layout: RunLayout, block: NotifySettings, notice: dict[str, Any], env: Mapping[str, str]) -> int:
    """Every channel, each with one retry; a failure recorded as an event. The number of failed channels."""
    failed = 0
    for channel in block.channels:
        error = attempt_twice(SENDERS[channel], block, notice, env)
        if error is not None:
            failed += 1
            attempt = notice.get("attempt") if isinstance(notice.get("attempt"), int) else None
            about = str(notice.get("event"))[:40]
            history.append(
                layout.events, NotifyFailed(attempt=attempt, about=about, channel=channel, error=error[:300])
            )
    return failed


def attempt_twice(send: Sender, block: NotifySettings, notice: dict[str, Any], env: Mapping[str, str]) -> str | None:
    error = None
    for round_ in range(2):
        try:
            send(block, notice, env)
            return None
        except Exception as err:  # any failure of a channel is recorded, none escapes
            error = f"{type(err).__name__}: {err}" if not isinstance(err, SendError) else str(err)
            if round_ == 0:
                time.sleep(RETRY_AFTER_S)
    return error


def main(argv: list[str]) -> int:
    from ddpctl.run.rundir import run_spec

    layout = RunLayout(Path(argv[0]))
    notice = json.loads(argv[1])
    return 1 if send_all(layout, run_spec(layout).notify, notice, os.environ) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
