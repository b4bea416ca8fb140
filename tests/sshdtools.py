"""A login node for the remote-cluster tests: a real sshd (Debian's openssh-server) with a host key and a user key
made by the test, an ssh_config file of its own (DDPCTL_SSH_CONFIG, ssh -F) and a clusters.yaml naming it `login`.

`Login` listens on 127.0.0.1 (a free port) in a PID namespace of its own (unshare), so stopping it ends every
session process too. `NetnsLogin` is the test cluster's login node: the same sshd in network, UTS and PID
namespaces of its own, attached to the cluster's bridge (tests/cluster/README.md, "The login node"), from where
sbatch and scontrol reach slurmctld; its `hidden` directories are covered by an empty tmpfs in the private mount
namespace every client command runs in, so a client that read them directly would find nothing.

Needs root (sshd, /run/sshd, namespaces) and sshd, which tests/cluster/start.sh --packages installs from Debian's
packages when missing; without root or apt-get the tests are skipped, and fail under DDPCTL_REQUIRE_SLURM=1 (CI)."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
SSHD = Path("/usr/sbin/sshd")


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("DDPCTL_REQUIRE_SLURM") == "1":
        pytest.fail(f"DDPCTL_REQUIRE_SLURM=1 but the sshd tests cannot run: {reason}", pytrace=False)
    pytest.skip(f"sshd tests cannot run: {reason}")


def ensure_sshd() -> None:
    if os.geteuid() != 0:
        unavailable("sshd needs root (its privilege separation); run the tests as root")
    if SSHD.exists():
        return
    if shutil.which("apt-get") is None:
        unavailable("no /usr/sbin/sshd and no apt-get to install Debian's openssh-server")
    done = subprocess.run(
        ["bash", str(ROOT / "tests/cluster/start.sh"), "--packages"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not SSHD.exists():
        pytest.fail(f"tests/cluster/start.sh --packages did not install sshd: {done.stderr[-2000:]}", pytrace=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)
    return path.with_suffix(".pub").read_text().strip()


class Login:
    """A login node: sshd on <address>:<port> with its own keys; `cli` runs ddpctl as the laptop would."""

    address = "127.0.0.1"

    def __init__(self, home: Path, sockets: Path, port: int | None = None) -> None:
        self.home, self.sockets, self.port = home, sockets, port or free_port()
        self.host_key = keygen(home / "host_key")
        (home / "authorized_keys").write_text(keygen(home / "id_user") + "\n")
        (home / "sshd_config").write_text(
            f"ListenAddress {self.address}\nPort {self.port}\nHostKey {home}/host_key\n"
            f"AuthorizedKeysFile {home}/authorized_keys\nPidFile none\nStrictModes no\nUsePAM no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        )
        self.trust(self.host_key)
        (home / "ssh_config").write_text(
            f"Host login\n  HostName {self.address}\n  Port {self.port}\n  User {getpass.getuser()}\n"
            f"  IdentityFile {home}/id_user\n  IdentitiesOnly yes\n  IdentityAgent none\n"
            f"  UserKnownHostsFile {home}/known_hosts\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
        )
        # The remote ddpctl is this checkout's, whatever the login shell's environment, with a registry of its own.
        remote = ["env", f"PYTHONPATH={ROOT}", f"DDPCTL_HOME={home}/remote-home", sys.executable, "-m", "ddpctl"]
        self.remote = remote
        (home / "clusters.yaml").write_text(f"login:\n  ssh: login\n  ddpctl: {remote}\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.client_prefix: list[str] = []  # what every client command runs under (NetnsLogin: a mount namespace)

    def trust(self, key: str) -> None:
        host = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        (self.home / "known_hosts").write_text(f"{host} {key}\n")

    def sshd_argv(self) -> list[str]:
        return [str(SSHD), "-D", "-e", "-f", f"{self.home}/sshd_config"]

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        log = (self.home / "sshd.log").open("ab")
        argv = ["unshare", "--pid", "--fork", "--kill-child", *self.sshd_argv()]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log)
        self.wait_listening()

    def wait_listening(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 10
        while "Server listening" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"sshd did not start: {self.log()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """The whole sshd: listener and sessions. unshare ignores SIGTERM while it waits; killed, it takes its
        child (--kill-child), the namespace's init, and with it every process of the namespace."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log(self) -> str:
        return (self.home / "sshd.log").read_text(errors="replace")

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DDPCTL_HOME": str(self.home / "laptop-home"),  # empty: what status shows comes from the remote
            "DDPCTL_CLUSTERS": str(self.home / "clusters.yaml"),
            "DDPCTL_SSH_CONFIG": str(self.home / "ssh_config"),
            "DDPCTL_SSH_CONTROL_DIR": str(self.sockets / "ctl"),
        }

    def argv(self, *args: str, command: str = "clusters") -> list[str]:
        return [*self.client_prefix, sys.executable, "-m", "ddpctl", command, *args]

    def cli(self, *args: str, command: str = "clusters", timeout: float = 60) -> subprocess.CompletedProcess[str]:
        argv = self.argv(*args, command=command)
        return subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=timeout, check=False)


BRIDGE, LOGIN_ADDR, LOGIN_VETH = "ddpctl-br0", "10.99.0.2", "ddpctl-vlogin"  # tests/cluster/common.sh's bridge
LOGIN_MAC = "02:99:00:00:00:02"  # locally administered, the same for every login node of every run
# Every client command: a private mount namespace with an empty tmpfs over each hidden directory (the arguments
# before `--`), then the command itself.
HIDE = (
    'while [ "$1" != -- ]; do mount -t tmpfs -o mode=0700 ddpctl-hidden "$1" || exit 97; shift; done; shift; exec "$@"'
)


class NetnsLogin(Login):
    """The cluster's login node: 10.99.0.2 (hostname `login`) on the bridge, its namespaces made by unshare and
    wired by its pid, so that they, and its veth with them, go when it is killed. `hidden`: the directories the
    client must not see (the remote work directory and ddpctl home)."""

    address = LOGIN_ADDR

    def __init__(self, home: Path, sockets: Path, hidden: list[Path]) -> None:
        super().__init__(home, sockets, port=22)
        self.hidden = hidden
        for path in hidden:
            path.mkdir(parents=True, exist_ok=True)
        self.client_prefix = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", HIDE, "hide"]
        self.client_prefix += [*map(str, hidden), "--"]

    def start(self) -> None:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            unavailable(f"no bridge {BRIDGE}: the test cluster (tests/cluster/start.sh) is not running")
        self.remove_veth()
        log = (self.home / "sshd.log").open("ab")
        # sshd binds 10.99.0.2 once eth0 has it: the shell waits for the line written after the wiring.
        run = 'echo login >/proc/sys/kernel/hostname && read -r go && exec "$@" </dev/null'
        argv = ["unshare", "--net", "--uts", "--pid", "--fork", "--kill-child", "sh", "-c", run, "sshd"]
        self.proc = subprocess.Popen([*argv, *self.sshd_argv()], stdin=subprocess.PIPE, stdout=log, stderr=log)
        self.wire(self.proc.pid)
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()
        self.wait_listening()

    def wire(self, pid: int) -> None:
        """A veth from the bridge to eth0 in the namespace of `pid` (unshare itself: it entered the new network
        namespace before forking), with the address and, as on the nodes, no default route."""
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}/ns/net").readlink() == Path("/proc/self/ns/net").readlink():
            assert time.monotonic() < deadline, "unshare did not make its network namespace"
            time.sleep(0.01)
        inside = ["nsenter", f"--target={pid}", "--net", "ip"]
        # A fixed MAC, and this host's neighbour entry for the address dropped: an entry left by an earlier login
        # node (another random MAC, kept as STALE or FAILED while the table is small) made the first connection
        # wait out ARP's probes past ssh's 10 s ConnectTimeout.
        subprocess.run(["ip", "neigh", "flush", "to", LOGIN_ADDR], check=False, capture_output=True, timeout=30)
        peer = ["peer", "name", "eth0", "address", LOGIN_MAC, "netns", str(pid)]
        for argv in (
            ["ip", "link", "add", LOGIN_VETH, "type", "veth", *peer],
            ["ip", "link", "set", LOGIN_VETH, "master", BRIDGE, "up"],
            [*inside, "link", "set", "lo", "up"],
            [*inside, "addr", "add", f"{LOGIN_ADDR}/24", "dev", "eth0"],
            [*inside, "link", "set", "eth0", "up"],
            [*inside, "route", "replace", "unreachable", "default"],
        ):
            subprocess.run(argv, check=True, capture_output=True, timeout=30)

    def stop(self) -> None:
        super().stop()
        self.remove_veth()

    def remove_veth(self) -> None:
        """The veth goes with the namespace, asynchronously in the kernel: wait for it (bounded), then remove one
        left by a run that could not clean up."""
        deadline = time.monotonic() + 10
        while Path(f"/sys/class/net/{LOGIN_VETH}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        subprocess.run(["ip", "link", "del", LOGIN_VETH], capture_output=True, timeout=30, check=False)
