"""The spec's `notify:` block: who hears about a run's finish, failure, hang, lost node or last requeue.

Secrets never sit in the spec (it is copied into the run dir and shown by `render`): a webhook URL comes from
an environment variable (`webhook_env`, read where the job runs) or a file (`webhook_file`, e.g. on the shared
filesystem, mode 0600). The same holds for an SMTP relay's password (`smtp_password_env`, `smtp_password_file`).
ddpctl.run.notify sends; this module only checks the block.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from ddpctl.spec.fields import ENV_NAME_RE, Conv, as_text, choice, integer, text, text_list
from ddpctl.spec.yamldoc import At

# What a notification can be about (ddpctl.run.notify decides which event is which).
EVENTS = ("finish", "failure", "hang", "node-lost", "slowdown", "last-requeue", "vanished", "stalled")
MAIL_RE = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+"
HOST_RE = r"[A-Za-z0-9._-]+(:[0-9]{1,5})?"  # host or host:port
TLS_MODES = ("none", "starttls", "ssl")
SMTP_PORTS = {"none": 25, "starttls": 587, "ssl": 465}  # the port when smtp_host names none
# Where a password may travel without TLS: this machine's own relay (an MTA on localhost), never the network.
LOOPBACK = ("localhost", "127.0.0.1", "::1")
# Keys that mean something only with smtp_host (sendmail does its own relaying and login).
SMTP_KEYS = ("smtp_tls", "smtp_user", "smtp_password_env", "smtp_password_file", "smtp_ca_file")


def events(value: Any, at: At) -> tuple[str, ...]:
    """`notify.on`: a list of EVENTS (or one name), each at most once."""
    names = (as_text(value, at, "an event name"),) if isinstance(value, str) else text_list()(value, at)
    for index, name in enumerate(names):
        if name not in EVENTS:
            raise at.child(str(index)).fail(name, "one of " + ", ".join(EVENTS))
    if len(set(names)) != len(names):
        raise at.fail(list(names), "each event at most once")
    return tuple(names)


def addresses(value: Any, at: At) -> tuple[str, ...]:
    items = (as_text(value, at, "a mail address"),) if isinstance(value, str) else text_list()(value, at)
    if len(items) > 20:
        raise at.error(f"got {len(items)} addresses, expected at most 20")
    for index, item in enumerate(items):
        if not re.fullmatch(MAIL_RE, item):
            raise at.child(str(index)).fail(item, "a mail address such as you@example.org")
    return tuple(items)


def secret_url(value: Any, at: At) -> NoReturn:
    """A webhook URL written into the spec would be copied into the run dir and shown by `render`: refused."""
    raise at.error(
        "a webhook URL is a secret: put it in an environment variable (webhook_env: NAME) or a file "
        "(webhook_file: PATH), not in the spec"
    )


def secret_password(value: Any, at: At) -> NoReturn:
    """The same for the SMTP password (the value is never echoed back)."""
    raise at.error(
        "a password is a secret: put it in an environment variable (smtp_password_env: NAME) or a file "
        "(smtp_password_file: PATH), not in the spec"
    )


TABLE: dict[str, Conv] = {
    "on": events,
    "webhook_env": text(ENV_NAME_RE, nullable=True),
    "webhook_file": text(nullable=True, what="a path to a file holding the webhook URL", path=True),
    "webhook_format": choice(("json", "slack")),
    "command": text_list(),
    "mail_to": addresses,
    "mail_from": text(MAIL_RE, nullable=True),
    "smtp_host": text(HOST_RE, nullable=True),
    "smtp_tls": choice(TLS_MODES),
    "smtp_user": text(r"[^\s:]{1,256}", nullable=True, what="a user name without blanks or colons"),
    "smtp_password_env": text(ENV_NAME_RE, nullable=True),
    "smtp_password_file": text(nullable=True, what="a path to a file holding the SMTP password", path=True),
    "smtp_ca_file": text(nullable=True, what="a path to a PEM file of CA certificates", path=True),
    "sendmail": text(nullable=True, what="a path to sendmail", path=True),
    "timeout_s": integer(1, 60),
}


def check(block: Any, at: At) -> None:
    """Rules across the block's keys; `block` is the spec's NotifySettings, `at` the spec's `notify` key."""
    if block.webhook_env and block.webhook_file:
        raise at.child("webhook_file").error("set webhook_env or webhook_file, not both")
    if block.mail_from and not block.mail_to:
        raise at.child("mail_from").error("mail_to is not set: who should the mail go to?")
    if block.smtp_host and block.sendmail:
        raise at.child("smtp_host").error("set smtp_host or sendmail, not both")
    check_smtp(block, at)
    if not block.channels:
        raise at.error("no channel: set webhook_env or webhook_file, command, or mail_to")


def smtp_port(host: str, tls: str) -> tuple[str, int]:
    """smtp_host's host and port (the TLS mode's usual port when it names none)."""
    name, _, port = host.partition(":")
    return name, int(port) if port else SMTP_PORTS[tls]


def check_smtp(block: Any, at: At) -> None:
    """The relay's port, TLS and login: each key only where it means something, a password never in clear."""
    unused = [key for key in SMTP_KEYS if getattr(block, key) not in (None, "none")]
    if unused and not block.smtp_host:
        key = unused[0]
        raise at.child(key).fail(
            getattr(block, key), "it only with smtp_host (the relay, host[:port]), which is not set"
        )
    if not block.smtp_host:
        return
    host, port = smtp_port(block.smtp_host, block.smtp_tls)
    if not 1 <= port <= 65535:
        raise at.child("smtp_host").fail(block.smtp_host, "host[:port] with a port in 1..65535")
    if block.smtp_password_env and block.smtp_password_file:
        raise at.child("smtp_password_file").error("set smtp_password_env or smtp_password_file, not both")
    has_password = bool(block.smtp_password_env or block.smtp_password_file)
    if has_password and not block.smtp_user:
        key = "smtp_password_env" if block.smtp_password_env else "smtp_password_file"
        raise at.child(key).fail(getattr(block, key), "it only with smtp_user (whose password it is), which is not set")
    if block.smtp_user and not has_password:
        raise at.child("smtp_user").fail(
            block.smtp_user, "a user with a password: set smtp_password_env (a variable) or smtp_password_file"
        )
    if block.smtp_user and block.smtp_tls == "none" and host not in LOOPBACK:
        raise at.child("smtp_tls").fail(
            "none", f"starttls or ssl: a login to {host} would send the password in clear (allowed only to localhost)"
        )
    if block.smtp_ca_file and block.smtp_tls == "none":
        raise at.child("smtp_ca_file").fail(block.smtp_ca_file, "it only with smtp_tls: starttls or ssl")
