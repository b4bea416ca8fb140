"""A minimal SMTP server on loopback for the notification tests (smtpd is gone from 3.12, aiosmtpd is not a
dependency): greeting, EHLO, MAIL/RCPT, DATA up to the lone dot, QUIT; optionally STARTTLS or implicit TLS with
a self-signed certificate, and AUTH PLAIN / LOGIN that checks one user's password and refuses mail before it."""

from __future__ import annotations

import base64
import email
import shutil
import socketserver
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any


@dataclass
class Relay:
    """What the server requires (`tls`: none, starttls or ssl; `auth`: a (user, password) pair) and what it saw."""

    tls: str = "none"
    auth: tuple[str, str] | None = None
    mechanisms: str = "PLAIN LOGIN"  # what EHLO offers; smtplib picks PLAIN before LOGIN
    context: ssl.SSLContext | None = None
    mails: list[Message] = field(default_factory=list)
    logins: list[tuple[str, str, bool]] = field(default_factory=list)  # (mechanism, user, accepted)
    host: str = ""


class Smtp(socketserver.StreamRequestHandler):
    relay: Relay
    authed: bool
    secure: bool

    def say(self, line: bytes) -> None:
        self.request.sendall(line + b"\r\n")

    def read(self) -> bytes:
        return bytes(self.rfile.readline())

    def secure_now(self) -> None:
        assert self.relay.context is not None
        self.request = self.relay.context.wrap_socket(self.request, server_side=True)
        self.rfile = self.request.makefile("rb")
        self.secure = True

    def handle(self) -> None:
        self.relay = self.server.relay  # type: ignore[attr-defined]
        self.authed, self.secure = self.relay.auth is None, False
        if self.relay.tls == "ssl":
            self.secure_now()
        self.say(b"220 sink ESMTP")
        while line := self.read():
            verb = line[:10].split(b" ")[0].strip().upper()
            if verb == b"QUIT":
                self.say(b"221 bye")
                return
            self.answer(verb, line)

    def answer(self, verb: bytes, line: bytes) -> None:
        if verb in (b"EHLO", b"HELO"):
            offers = [b"250-sink"]
            if self.relay.tls == "starttls" and not self.secure:
                offers.append(b"250-STARTTLS")
            if self.relay.auth and (self.secure or self.relay.tls == "none"):
                offers.append(b"250-AUTH " + self.relay.mechanisms.encode())
            self.say(b"\r\n".join([*offers, b"250 SIZE 1000000"]))
        elif verb == b"STARTTLS" and self.relay.tls == "starttls" and not self.secure:
            self.say(b"220 go ahead")
            self.secure_now()
        elif verb == b"AUTH" and self.relay.auth:
            self.login(line.split()[1:])
        elif verb in (b"MAIL", b"RCPT", b"DATA") and not self.authed:
            self.say(b"530 5.7.0 Authentication required")
        elif verb == b"DATA":
            self.data()
        else:
            self.say(b"250 ok")

    def login(self, words: list[bytes]) -> None:
        """AUTH PLAIN [initial] or AUTH LOGIN [user]: the answers are base64, as RFC 4616 and the LOGIN draft say."""
        assert self.relay.auth is not None
        mechanism = words[0].decode().upper() if words else ""
        if mechanism == "PLAIN":
            if len(words) < 2:
                self.say(b"334 ")
                words.append(self.read().strip())
            _, user, password = base64.b64decode(words[1]).decode().split("\0")
        elif mechanism == "LOGIN":
            if len(words) < 2:
                self.say(b"334 " + base64.b64encode(b"Username:"))
                words.append(self.read().strip())
            user = base64.b64decode(words[1]).decode()
            self.say(b"334 " + base64.b64encode(b"Password:"))
            password = base64.b64decode(self.read().strip()).decode()
        else:
            self.say(b"504 5.5.4 mechanism not offered")
            return
        self.authed = (user, password) == self.relay.auth
        self.relay.logins.append((mechanism, user, self.authed))
        self.say(b"235 2.7.0 accepted" if self.authed else b"535 5.7.8 Authentication credentials invalid")

    def data(self) -> None:
        self.say(b"354 end with .")
        lines = []
        while (line := self.read()) and line.rstrip(b"\r\n") != b".":
            lines.append(line[1:] if line.startswith(b"..") else line)
        self.relay.mails.append(email.message_from_bytes(b"".join(lines)))
        self.say(b"250 queued")


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl's command line; Debian has it) and its key."""
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed for the TLS relay: apt-get install openssl"
    cert, key = directory / "relay-cert.pem", directory / "relay-key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@contextmanager
def serving(relay: Relay, directory: Path | None = None) -> Iterator[Relay]:
    """Run `relay` on a free loopback port (TLS modes need `directory` for the certificate) until the block ends."""
    if relay.tls != "none":
        assert directory is not None
        cert, key = certificate(directory)
        relay.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        relay.context.load_cert_chain(cert, key)
    server: Any = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Smtp)
    server.relay, server.daemon_threads = relay, True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    relay.host = f"127.0.0.1:{server.server_address[1]}"
    try:
        yield relay
    finally:
        server.shutdown()
        server.server_close()
