"""The OpenSSH client's command line, and what its failures mean: pure, so both are tested with literal tables.

One multiplexed connection per cluster: the first command starts a master (ControlMaster=auto) whose socket
lives in a private directory (mode 0700, `ddpctl.remote.transport` makes it), and the commands after it reuse
the connection for `PERSIST_S` after the last one ends. The user's own ~/.ssh/config, agent, jump hosts and
keys apply unchanged; BatchMode means ssh never prompts, so nothing in ddpctl sees or asks for a password.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddpctl.sanitize import visible

CONNECT_TIMEOUT_S = 10  # the bound on "host unreachable"
# 10 minutes: a working session's status/logs calls share one login (and one MFA prompt), and a laptop that
# changed networks does not keep a dead master around for hours.
PERSIST_S = 600
# A master whose peer vanished (laptop suspended, link cut) is found dead within ~30 s, not at TCP's timeout.
ALIVE_INTERVAL_S = 10
ALIVE_COUNT = 3
SSH_FAILED = 255  # ssh's own exit status for its errors; any other is the remote command's
COMMAND_NOT_FOUND = 127
MAX_SOCKET_PATH = 104  # sun_path is 108 bytes on Linux, 104 on macOS; ssh appends %C: 40 hex digits


def control_path(control_dir: Path) -> str:
    return f"{control_dir}/%C"


def socket_path_fits(control_dir: Path) -> bool:
    # ssh adds a ".<random>" suffix of up to 17 characters while it binds the socket.
    return len(str(control_dir).encode()) + 1 + 40 + 17 <= MAX_SOCKET_PATH


def ssh_argv(
    destination: str, remote: str, control_dir: Path, *, config: str | None = None, extra: Sequence[str] = ()
) -> list[str]:
    """ssh's argv running the shell command line `remote` (from `remote_command`) at `destination`."""
    argv = ["ssh"]
    if config:
        argv += ["-F", config]
    options = (
        "BatchMode=yes",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "ControlMaster=auto",
        f"ControlPath={control_path(control_dir)}",
        f"ControlPersist={PERSIST_S}",
        f"ServerAliveInterval={ALIVE_INTERVAL_S}",
        f"ServerAliveCountMax={ALIVE_COUNT}",
    )
    for option in options:
        argv += ["-o", option]
    # -T: no terminal (output is read, not shown raw); "--": the destination is never read as an option.
    return [*argv, *extra, "-T", "--", destination, remote]


# A profile's workdir, as the login shell expands it: an optional leading `~` (alone or `~/...`), then literal
# text and `$NAME` / `${NAME}` references to the cluster's environment (`$SCRATCH/runs`). Anything else with a
# `$` (`$(cmd)`, `${X:-y}`, `$1`) or a leading `-` is refused when the profile is read (ddpctl.remote.profiles).
VARIABLE_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def workdir_problem(workdir: str) -> str | None:
    """Why the login shell could not be asked to `cd` there safely (None: it can)."""
    if workdir.startswith("-"):
        return "a leading '-' (cd would read it as an option)"
    if workdir.startswith("~") and workdir != "~" and not workdir.startswith("~/"):
        return "a ~ other than ~ or ~/... (another user's home)"
    if "$" in VARIABLE_RE.sub("", workdir):
        return "a $ that is not $NAME or ${NAME} (no command substitution, defaults or positional parameters)"
    return None


def workdir_word(workdir: str) -> str:
    """The workdir as one shell word: `~` or `~/` unquoted (the remote home), each variable `"${NAME:?}"` (expanded
    there; unset, the command fails naming it instead of running in the login directory), the rest quoted."""
    parts, rest = [], workdir
    if rest == "~" or rest.startswith("~/"):  # the slash unquoted too: a quoted one would end no tilde-prefix
        home = rest[:2]
        parts.append(home)
        rest = rest[len(home) :]
    start = 0
    for match in VARIABLE_RE.finditer(rest):
        if match.start() > start:
            parts.append(shlex.quote(rest[start : match.start()]))
        parts.append(f'"${{{match.group(1) or match.group(2)}:?}}"')
        start = match.end()
    if start < len(rest):
        parts.append(shlex.quote(rest[start:]))
    return "".join(parts)


def remote_command(words: Sequence[str], workdir: str | None = None) -> str:
    """The command line the remote login shell runs: each word quoted, after a `cd` to the work directory
    (`~` and `$NAME` expanded there, see workdir_word; `--`: an expanded value is never read as an option)."""
    line = shlex.join(words)
    if not workdir:
        return line
    return f"cd -- {workdir_word(workdir)} && {line}"


@dataclass(frozen=True)
class Failure:
    kind: str  # unreachable, auth, hostkey-changed, hostkey-unknown, dropped, other
    detail: str


# Lines of ssh's stderr, in the order they are looked for (a host key warning comes before "Permission denied").
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("hostkey-changed", r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed"),
    ("hostkey-unknown", r"No \S+ host key is known for|Host key verification failed"),
    ("unreachable", r"ssh: (?P<d>connect to host .* port \d+: .+)"),
    ("unreachable", r"ssh: (?P<d>Could not resolve hostname .+)"),
    ("unreachable", r"Connection timed out during banner exchange|Connection to \S+ port \d+ timed out"),
    ("auth", r"Permission denied \((?P<d>[^)]*)\)"),
    ("auth", r"Too many authentication failures"),
    ("dropped", r"kex_exchange_identification: (?P<d>.+)"),
    ("dropped", r"Connection (?:closed|reset) by (?P<d>.+)"),
    ("dropped", r"Connection to \S+ closed by remote host"),
    ("dropped", r"client_loop: (?P<d>.+)"),
)


def classify(stderr: str) -> Failure:
    """What went wrong, from the stderr of an ssh that exited 255."""
    for kind, pattern in _PATTERNS:
        match = re.search(pattern, stderr)
        if match:
            detail = match.groupdict().get("d") or match.group(0)
            return Failure(kind, visible(detail.strip().rstrip(".")))
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    return Failure("other", visible(lines[-1]) if lines else "no message")


def failure_message(name: str, destination: str, failure: Failure) -> str:
    """One line naming the cluster and its destination, and what to do."""
    host = visible(destination)
    said = {
        "unreachable": f"cannot reach {host} ({failure.detail})",
        "auth": f"{host} refused authentication ({failure.detail}): `ssh {host}` must log in without a "
        "prompt (a key in your ssh-agent or ~/.ssh/config)",
        "hostkey-changed": f"the host key of {host} does not match your known_hosts (the host was reinstalled, "
        f"or someone is in between): verify the new key, then remove the old one with ssh-keygen -R",
        "hostkey-unknown": f"the host key of {host} is not known: connect once with `ssh {host}` to verify "
        "and accept it",
        "dropped": f"the connection to {host} was closed ({failure.detail})",
        "other": f"ssh to {host} failed: {failure.detail}",
    }[failure.kind]
    return f"cluster {name!r}: {said}"


def command_missing(returncode: int, stderr: str) -> bool:
    """Whether the remote shell found no such command (127), could not run it (126), or Python had no ddpctl."""
    return returncode in (COMMAND_NOT_FOUND, 126) or (returncode == 1 and "No module named ddpctl" in stderr)
