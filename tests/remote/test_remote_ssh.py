"""The ssh command line and the reading of ssh's failures (ddpctl.remote.ssh): literal tables, the stderr texts
copied from OpenSSH 9.2p1 (Debian 12) as it printed them (with its CR LF line ends)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.remote.ssh import (
    Failure,
    classify,
    command_missing,
    failure_message,
    remote_command,
    socket_path_fits,
    ssh_argv,
)

OPTIONS = [
    "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ControlMaster=auto",
    "-o", "ControlPath=/run/user/1000/ddpctl-ssh/%C", "-o", "ControlPersist=600",
    "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
]  # fmt: skip


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, ["ssh", *OPTIONS, "-T", "--", "me@login", "ddpctl --version"]),
        ("/home/me/cfg", ["ssh", "-F", "/home/me/cfg", *OPTIONS, "-T", "--", "me@login", "ddpctl --version"]),
    ],
)
def test_the_ssh_command_line(config: str | None, expected: list[str]) -> None:
    control = Path("/run/user/1000/ddpctl-ssh")
    assert ssh_argv("me@login", "ddpctl --version", control, config=config) == expected


@pytest.mark.parametrize(
    ("words", "workdir", "line"),
    [
        (["ddpctl", "--version"], None, "ddpctl --version"),
        (["ddpctl", "status", "my job; rm -rf ~"], None, "ddpctl status 'my job; rm -rf ~'"),
        (["ddpctl", "list"], "/scratch/me", "cd -- /scratch/me && ddpctl list"),
        (["ddpctl", "list"], "/scratch/my runs", "cd -- '/scratch/my runs' && ddpctl list"),
        (["ddpctl", "list"], "~/runs $x", "cd -- ~/'runs '\"${x:?}\" && ddpctl list"),  # expanded there
        (["ddpctl", "list"], "~", "cd -- ~ && ddpctl list"),
        (["ddpctl", "list"], "${SCRATCH}/d`x`", "cd -- \"${SCRATCH:?}\"'/d`x`' && ddpctl list"),
    ],
)
def test_the_remote_command_line_is_quoted_for_the_login_shell(
    words: list[str], workdir: str | None, line: str
) -> None:
    assert remote_command(words, workdir) == line


@pytest.mark.parametrize(
    ("directory", "fits"),
    [("/run/user/1000/ddpctl-ssh", True), ("/tmp/" + "d" * 40, True), ("/home/" + "x" * 60, False)],
)
def test_the_socket_path_must_fit_a_unix_socket_name(directory: str, fits: bool) -> None:
    assert socket_path_fits(Path(directory)) is fits


CHANGED = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
    "Someone could be eavesdropping on you right now (man-in-the-middle attack)!\r\n"
    "It is also possible that a host key has just been changed.\r\n"
    "The fingerprint for the ED25519 key sent by the remote host is\n"
    "SHA256:x9/Bm11YrbLhjGzTw6RvmILJ6Jygc5YgXTebOfInAlw.\r\n"
    "Please contact your system administrator.\r\n"
    "Add correct host key in /home/me/.ssh/known_hosts to get rid of this message.\r\n"
    "Offending ED25519 key in /home/me/.ssh/known_hosts:1\r\n"
    "  remove with:\r\n"
    '  ssh-keygen -f "/home/me/.ssh/known_hosts" -R "[127.0.0.1]:2299"\r\n'
    "Host key for [127.0.0.1]:2299 has changed and you have requested strict checking.\r\n"
    "Host key verification failed.\r\n"
)


@pytest.mark.parametrize(
    ("stderr", "failure"),
    [
        (
            "ssh: connect to host 127.0.0.1 port 2299: Connection refused\r\n",
            Failure("unreachable", "connect to host 127.0.0.1 port 2299: Connection refused"),
        ),
        (
            "ssh: connect to host 10.255.255.1 port 22: Connection timed out\r\n",
            Failure("unreachable", "connect to host 10.255.255.1 port 22: Connection timed out"),
        ),
        (
            "ssh: connect to host 192.0.2.1 port 22: No route to host\r\n",
            Failure("unreachable", "connect to host 192.0.2.1 port 22: No route to host"),
        ),
        (
            "ssh: Could not resolve hostname nosuch.invalid: Name or service not known\r\n",
            Failure("unreachable", "Could not resolve hostname nosuch.invalid: Name or service not known"),
        ),
        (
            "Connection timed out during banner exchange\r\nConnection to 10.0.0.5 port 22 timed out\r\n",
            Failure("unreachable", "Connection timed out during banner exchange"),
        ),
        (
            "identity_sign: private key /home/me/.ssh/id contents do not match public\r\n"
            "root@127.0.0.1: Permission denied (publickey).\r\n",
            Failure("auth", "publickey"),
        ),
        ("me@login: Permission denied (publickey,password).\r\n", Failure("auth", "publickey,password")),
        (
            "Received disconnect from 10.0.0.5 port 22:2: Too many authentication failures\r\n",
            Failure("auth", "Too many authentication failures"),
        ),
        (CHANGED, Failure("hostkey-changed", "REMOTE HOST IDENTIFICATION HAS CHANGED")),
        (
            "No ED25519 host key is known for [127.0.0.1]:2299 and you have requested strict checking.\r\n"
            "Host key verification failed.\r\n",
            Failure("hostkey-unknown", "No ED25519 host key is known for"),
        ),
        ("Host key verification failed.\r\n", Failure("hostkey-unknown", "Host key verification failed")),
        (
            "kex_exchange_identification: Connection closed by remote host\r\n"
            "Connection closed by 127.0.0.1 port 2299\r\n",
            Failure("dropped", "Connection closed by remote host"),
        ),
        ("Connection reset by 10.0.0.5 port 22\r\n", Failure("dropped", "10.0.0.5 port 22")),
        (
            "Connection to login closed by remote host.\r\n",
            Failure("dropped", "Connection to login closed by remote host"),
        ),
        ("client_loop: send disconnect: Broken pipe\r\n", Failure("dropped", "send disconnect: Broken pipe")),
        (
            "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\r\nbad thing\x1b[2J\n",
            Failure("other", "bad thing^[[2J"),
        ),
        ("", Failure("other", "no message")),
    ],
)
def test_ssh_failures_are_told_apart(stderr: str, failure: Failure) -> None:
    assert classify(stderr) == failure


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (
            Failure("unreachable", "connect to host 127.0.0.1 port 2299: Connection refused"),
            "cluster 'gpu': cannot reach me@login (connect to host 127.0.0.1 port 2299: Connection refused)",
        ),
        (
            Failure("auth", "publickey"),
            "cluster 'gpu': me@login refused authentication (publickey): `ssh me@login` must log in without a "
            "prompt (a key in your ssh-agent or ~/.ssh/config)",
        ),
        (
            Failure("hostkey-changed", "x"),
            "cluster 'gpu': the host key of me@login does not match your known_hosts (the host was reinstalled, "
            "or someone is in between): verify the new key, then remove the old one with ssh-keygen -R",
        ),
        (
            Failure("hostkey-unknown", "x"),
            "cluster 'gpu': the host key of me@login is not known: connect once with `ssh me@login` to verify "
            "and accept it",
        ),
        (
            Failure("dropped", "10.0.0.5 port 22"),
            "cluster 'gpu': the connection to me@login was closed (10.0.0.5 port 22)",
        ),
        (Failure("other", "boom"), "cluster 'gpu': ssh to me@login failed: boom"),
    ],
)
def test_each_failure_is_one_line_naming_cluster_and_destination(failure: Failure, message: str) -> None:
    assert failure_message("gpu", "me@login", failure) == message


@pytest.mark.parametrize(
    ("returncode", "stderr", "missing"),
    [
        (127, "bash: line 1: ddpctl: command not found\n", True),
        (127, "sh: 1: ddpctl: not found\n", True),
        (126, "bash: line 1: /opt/ddpctl: Permission denied\n", True),
        (1, "/usr/bin/python3: No module named ddpctl\n", True),
        (1, "ddpctl: error: something else\n", False),
        (0, "", False),
    ],
)
def test_a_missing_remote_command_is_told(returncode: int, stderr: str, missing: bool) -> None:
    assert command_missing(returncode, stderr) is missing
