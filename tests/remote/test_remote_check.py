"""`clusters --check`'s verdicts (ddpctl.remote.check) and the transport's seam: a runner injected in place of
ssh answers as a real login node would, so the walk, the argv it runs and the one-line errors are checked."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ddpctl.errors import CommandTimeout, RemoteError
from ddpctl.proc import Completed
from ddpctl.remote.check import Checked, check_cluster, ddpctl_verdict, slurm_verdict
from ddpctl.remote.profiles import Cluster
from ddpctl.remote.transport import Transport, control_dir, private_dir
from ddpctl.slurm.commands import parse_version


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose path leaves room for socket names (pytest's tmp_path is too deep for them)."""
    path = Path(tempfile.mkdtemp(prefix="ctl-"))
    yield path
    shutil.rmtree(path)


GPU = Cluster("gpu", "me@login", ("/opt/venv/bin/ddpctl",))
INSTALL = "install ddpctl 0.1.0 there (pip install ddpctl==0.1.0) or set its path as `ddpctl:` in the profile"


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "verdict"),
    [
        (0, "ddpctl 0.1.0\n", "", ("0.1.0", None)),
        (0, "ddpctl 0.0.9\n", "", ("0.0.9", f"cluster 'gpu': ddpctl 0.0.9 there, 0.1.0 here: {INSTALL}")),
        (
            127,
            "",
            "bash: line 1: /opt/venv/bin/ddpctl: No such file or directory\n",
            (None, f"cluster 'gpu': no '/opt/venv/bin/ddpctl' on me@login: {INSTALL}"),
        ),
        (
            1,
            "",
            "Traceback (most recent call last):\nImportError: no yaml\n",
            (None, f"cluster 'gpu': '/opt/venv/bin/ddpctl' --version failed (exit 1: ImportError: no yaml): {INSTALL}"),
        ),
        (
            0,
            "Welcome\x1b]0;pwned\x07\n",
            "",
            (None, f"cluster 'gpu': '/opt/venv/bin/ddpctl' --version failed (exit 0: Welcome^[]0;pwned^G): {INSTALL}"),
        ),
    ],
)
def test_the_remote_ddpctl_version_verdict(
    returncode: int, stdout: str, stderr: str, verdict: tuple[str | None, str | None]
) -> None:
    assert ddpctl_verdict(GPU, "0.1.0", returncode, stdout, stderr) == verdict


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "verdict"),
    [
        (0, "slurm 24.11.5\n", "", ("24.11.5", None)),
        (0, "slurm-wlm 22.05.8\n", "", ("22.05.8", None)),
        (
            127,
            "",
            "bash: line 1: sinfo: command not found\n",
            (None, "cluster 'gpu': no Slurm commands (sinfo) on me@login's PATH"),
        ),
        (1, "", "sinfo: error: x\n", (None, "cluster 'gpu': sinfo -V failed there (exit 1: sinfo: error: x)")),
    ],
)
def test_the_remote_slurm_version_verdict(
    returncode: int, stdout: str, stderr: str, verdict: tuple[str | None, str | None]
) -> None:
    assert slurm_verdict(GPU, returncode, stdout, stderr) == verdict


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm 22.05.8\n", "22.05.8"),
        ("slurm-wlm 24.11.5", "24.11.5"),
        ("slurm", None),
        ("torque 6.1", None),
        ("", None),
    ],
)
def test_slurm_version_text(text: str, version: str | None) -> None:
    assert parse_version(text) == version


class LoginNode:
    """Answers ssh argvs as a login node would; records what ran."""

    def __init__(self, answers: dict[str, Completed | Exception]) -> None:
        self.answers = answers
        self.ran: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.ran.append(list(argv))
        answer = self.answers[argv[-1]]
        if isinstance(answer, Exception):
            raise answer
        return answer


def done(returncode: int, stdout: str = "", stderr: str = "") -> Completed:
    return Completed(("ssh",), returncode, stdout, stderr)


def transport(where: Path, node: LoginNode) -> Transport:
    env = {"DDPCTL_SSH_CONTROL_DIR": str(where / "ctl"), "DDPCTL_SSH_CONFIG": "/cfg"}
    return Transport(GPU, runner=node, env=env)


def test_a_healthy_cluster_is_checked_over_one_control_path(short_dir: Path) -> None:
    node = LoginNode(
        {"/opt/venv/bin/ddpctl --version": done(0, "ddpctl 0.1.0\n"), "sinfo -V": done(0, "slurm 22.05.8\n")}
    )
    checked = check_cluster(GPU, transport(short_dir, node), "0.1.0")
    assert (checked.ddpctl, checked.slurm, checked.problem) == ("0.1.0", "22.05.8", None)
    assert [argv[:3] for argv in node.ran] == [["ssh", "-F", "/cfg"]] * 2
    assert {a for argv in node.ran for a in argv if a.startswith("ControlPath=")} == {f"ControlPath={short_dir}/ctl/%C"}
    assert stat.S_IMODE(os.lstat(short_dir / "ctl").st_mode) == 0o700


@pytest.mark.parametrize(
    ("answers", "problem"),
    [
        (
            {
                "/opt/venv/bin/ddpctl --version": done(
                    255, stderr="ssh: connect to host 10.0.0.5 port 22: No route to host\r\n"
                )
            },
            "cluster 'gpu': cannot reach me@login (connect to host 10.0.0.5 port 22: No route to host)",
        ),
        (
            {"/opt/venv/bin/ddpctl --version": CommandTimeout("ssh did not answer within 60 s: ssh ...")},
            "cluster 'gpu': me@login did not answer: ssh did not answer within 60 s: ssh ...",
        ),
        (
            {
                "/opt/venv/bin/ddpctl --version": done(0, "ddpctl 0.1.0\n"),
                "sinfo -V": done(255, stderr="Connection to login closed by remote host.\r\n"),
            },
            "cluster 'gpu': the connection to me@login was closed (Connection to login closed by remote host)",
        ),
    ],
)
def test_a_failing_cluster_is_one_line(
    short_dir: Path, answers: dict[str, Completed | Exception], problem: str
) -> None:
    checked = check_cluster(GPU, transport(short_dir, LoginNode(answers)), "0.1.0")
    assert checked == Checked("gpu", "me@login", None, None, problem, checked.seconds)


def test_the_socket_directory_is_private(short_dir: Path, tmp_path: Path) -> None:
    loose = short_dir / "loose"
    loose.mkdir(mode=0o755)
    assert stat.S_IMODE(os.lstat(private_dir(loose)).st_mode) == 0o700
    (short_dir / "elsewhere").mkdir()
    (short_dir / "link").symlink_to(short_dir / "elsewhere")
    with pytest.raises(RemoteError, match="link: not a directory of this user"):
        private_dir(short_dir / "link")
    with pytest.raises(RemoteError, match="too long for ssh control sockets; set DDPCTL_SSH_CONTROL_DIR"):
        private_dir(tmp_path / ("x" * 80))


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DDPCTL_SSH_CONTROL_DIR": "/s/ctl", "XDG_RUNTIME_DIR": "/run/user/1"}, "/s/ctl"),
        ({"XDG_RUNTIME_DIR": "/run/user/1"}, "/run/user/1/ddpctl-ssh"),
        ({"XDG_RUNTIME_DIR": "/run/" + "u" * 60}, f"{tempfile.gettempdir()}/ssh-ddpctl-{os.geteuid()}"),
    ],
)
def test_where_the_sockets_go(env: dict[str, str], expected: str) -> None:
    assert str(control_dir(env)) == expected
