"""The one edge that runs ssh: a `Transport` per cluster runs a remote command over the cluster's multiplexed
connection and turns ssh's own failures (exit 255) into one-line RemoteErrors.

The control sockets live in a private directory: `$DDPCTL_SSH_CONTROL_DIR`, else `$XDG_RUNTIME_DIR/ddpctl-ssh`,
else `~/.cache/ddpctl/ssh` (one too long for socket names: `ssh-ddpctl-<uid>` in the temp directory); it is
made mode 0700 and refused when another user owns it or it is a link (a socket there is a logged-in session to
the cluster). `$DDPCTL_SSH_CONFIG` names an ssh_config file to use
instead of ~/.ssh/config (`ssh -F`). Tests inject their own runner at the `runner` seam.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ddpctl import safeio
from ddpctl.errors import CommandTimeout, RemoteError
from ddpctl.proc import Completed, OutputTooBig, Reading, Runner, run_capped, spawn_reading
from ddpctl.remote.profiles import Cluster
from ddpctl.remote.ssh import SSH_FAILED, classify, failure_message, remote_command, socket_path_fits, ssh_argv

CONTROL_DIR_ENV = "DDPCTL_SSH_CONTROL_DIR"
CONFIG_ENV = "DDPCTL_SSH_CONFIG"
MAX_ANSWER = 16 << 20  # the biggest answer read whole: a registry's `list --json` (ddpctl.remote.jobs.MAX_LISTING)
COMMAND_S = 60.0  # one remote query; ssh itself gives up connecting after CONNECT_TIMEOUT_S


def control_dir(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if environ.get(CONTROL_DIR_ENV):
        return Path(environ[CONTROL_DIR_ENV]).expanduser()
    runtime = environ.get("XDG_RUNTIME_DIR")
    chosen = Path(runtime) / "ddpctl-ssh" if runtime else Path("~/.cache/ddpctl/ssh").expanduser()
    # A deep home directory would not leave room for the socket name: a short per-user directory then.
    return chosen if socket_path_fits(chosen) else Path(tempfile.gettempdir()) / f"ssh-ddpctl-{os.geteuid()}"


def private_dir(path: Path) -> Path:
    """`path` as a directory only this user can enter (safeio.private_dir_problem); one line naming it when that
    cannot be."""
    if not socket_path_fits(path):
        raise RemoteError(f"{path}: too long for ssh control sockets; set {CONTROL_DIR_ENV} to a shorter directory")
    problem, info = safeio.private_dir_problem(path)
    if problem in (safeio.NOT_A_DIRECTORY, safeio.NOT_MINE):
        raise RemoteError(f"{path}: not a directory of this user; ssh control sockets need a private directory")
    if stat.S_IMODE(info.st_mode) != 0o700:  # writable by others too: it is ours, so it is made private
        path.chmod(0o700)  # ours: made private, as ssh's sockets there need
    return path


class Transport:
    """Remote commands of one cluster over its shared connection."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = COMMAND_S,
        limit: int = MAX_ANSWER,
    ) -> None:
        environ = os.environ if env is None else env
        self.cluster = cluster
        self.config = environ.get(CONFIG_ENV) or None
        self.sockets = control_dir(environ)
        self.runner: Runner = runner or (lambda argv: run_capped(argv, limit=limit, timeout=timeout))
        self.timeout, self.limit = timeout, limit
        self.prepared = False

    def argv(self, words: Sequence[str], *, in_workdir: bool = False) -> list[str]:
        line = remote_command(words, self.cluster.workdir if in_workdir else None)
        return ssh_argv(self.cluster.ssh, line, self.sockets, config=self.config)

    def spawn(self, words: Sequence[str]) -> Reading:
        """The remote command started over the connection, its output read as it comes (`logs -f`)."""
        if not self.prepared:
            private_dir(self.sockets)
            self.prepared = True
        return spawn_reading(self.argv(words))

    def failure(self, stderr: str) -> RemoteError:
        """ssh's own failure (exit 255) as one line."""
        failure = classify(stderr)
        err = RemoteError(failure_message(self.cluster.name, self.cluster.ssh, failure))
        err.kind = failure.kind
        return err

    def run(self, words: Sequence[str], *, in_workdir: bool = False, data: bytes | None = None) -> Completed:
        """The remote command's result (any exit status of its own); a RemoteError if ssh itself failed (exit
        255: ssh's own; a remote command exiting 255 is read the same way, and none of ddpctl's does).
        `data`: bytes for the remote command's standard input (sent over the same connection)."""
        if not self.prepared:
            private_dir(self.sockets)
            self.prepared = True
        argv = self.argv(words, in_workdir=in_workdir)
        try:
            done = (
                self.runner(argv)
                if data is None
                else run_capped(argv, data=data, limit=self.limit, timeout=self.timeout)
            )
        except CommandTimeout as err:
            failed = RemoteError(f"cluster {self.cluster.name!r}: {self.cluster.ssh} did not answer: {err}")
            failed.kind = "timeout"
            raise failed from err
        except OutputTooBig as err:  # a cluster's answer is bounded before it is read (memory), not after
            raise RemoteError(f"cluster {self.cluster.name!r}: answered more than {self.limit} bytes") from err
        if done.returncode == SSH_FAILED:
            raise self.failure(done.stderr)
        return done
