"""The spec's `notify:` block: who hears about a run's finish, failure, hang, lost node or last requeue.

Secrets never sit in the spec (it is copied into the run dir and shown by `render`): a webhook URL comes from
an environment variable (`webhook_env`, read where the job runs) or a file (`webhook_file`, e.g. on the shared
filesystem, mode 0600). ddpctl.run.notify sends; this module only checks the block.
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


TABLE: dict[str, Conv] = {
    "on": events,
    "webhook_env": text(ENV_NAME_RE, nullable=True),
    "webhook_file": text(nullable=True, what="a path to a file holding the webhook URL", path=True),
    "webhook_format": choice(("json", "slack")),
    "command": text_list(),
    "mail_to": addresses,
    "mail_from": text(MAIL_RE, nullable=True),
    "smtp_host": text(HOST_RE, nullable=True),
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
    if not block.channels:
        raise at.error("no channel: set webhook_env or webhook_file, command, or mail_to")
