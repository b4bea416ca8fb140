"""Issue 43 item 13: a profile's `workdir` as users write it. `~` and `$NAME`/`${NAME}` are expanded by the
cluster's login shell (the laptop's $SCRATCH is not the cluster's), a leading `-` and any other `$` are refused
in one line when the profile is read, and `clusters --check` reaches the workdir. The command line is run by a
real bash and a real sh here, standing for the login shell."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.proc import Completed
from ddpctl.remote.check import WORKDIR_PROBE, check_cluster
from ddpctl.remote.profiles import Cluster, parse_clusters
from ddpctl.remote.ssh import remote_command
from ddpctl.remote.transport import Transport

SHELLS = [s for s in ("bash", "sh") if shutil.which(s)]


def login_shell(shell: str, line: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`line` as ssh hands it to the login shell: `<shell> -c line`, started in the home directory."""
    environ = {"HOME": str(home), "PATH": "/usr/bin:/bin", **env}
    return subprocess.run([shell, "-c", line], cwd=home, env=environ, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("workdir", "where"),
    [
        ("~", ""),
        ("~/work", "work"),
        ("$SCRATCH/ddp", "scratch/ddp"),
        ("${SCRATCH}/my runs $", None),  # a lone `$` at the end is no variable: refused when the profile is read
        ("${SCRATCH}/my runs", "scratch/my runs"),
        ("rel dir", "rel dir"),  # from the login directory
        ("~/it's; rm -rf x", "it's; rm -rf x"),
    ],
)
def test_the_workdir_is_expanded_by_the_login_shell(
    tmp_path: Path, shell: str, workdir: str, where: str | None
) -> None:
    if where is None:
        with pytest.raises(SpecError):
            parse_clusters(f"gpu: {{ssh: login, workdir: {_yaml(workdir)}}}\n", "c.yaml")
        return
    assert parse_clusters(f"gpu: {{ssh: login, workdir: {_yaml(workdir)}}}\n", "c.yaml")["gpu"].workdir == workdir
    target = tmp_path / where
    target.mkdir(parents=True, exist_ok=True)
    done = login_shell(shell, remote_command(["pwd"], workdir), tmp_path, SCRATCH=str(tmp_path / "scratch"))
    assert (done.returncode, done.stdout.strip()) == (0, str(target)), done


def _yaml(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@pytest.mark.parametrize("shell", SHELLS)
def test_an_unset_variable_fails_naming_it_instead_of_running_in_the_login_directory(
    tmp_path: Path, shell: str
) -> None:
    done = login_shell(shell, remote_command(["touch", "ran"], "$NOSUCHVAR/x"), tmp_path)
    assert done.returncode != 0 and "NOSUCHVAR" in done.stderr, done
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("workdir", "refused"),
    [
        ("-x", "a leading '-'"),
        ("-", "a leading '-'"),
        ("~root/x", "a ~ other than ~ or ~/..."),
        ("$(touch pwned)", "a $ that is not $NAME or ${NAME}"),
        ("${X:-/tmp}", "a $ that is not $NAME or ${NAME}"),
        ("$1/x", "a $ that is not $NAME or ${NAME}"),
        ("/a\tb", "none a control character"),
    ],
)
def test_an_unsafe_workdir_is_one_line_naming_it(workdir: str, refused: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_clusters(f"gpu:\n  ssh: login\n  workdir: {_yaml(workdir)}\n", "c.yaml")
    message = str(err.value)
    assert message.startswith("c.yaml:3: gpu.workdir: got ") and refused in message, message
    assert "\n" not in message


class LoginNode:
    """Runs each ssh argv's remote line with a real bash in `home`: the login node's shell, without ssh."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env

    def __call__(self, argv: Sequence[str]) -> Completed:
        line = argv[-1]
        if line.endswith("--version"):
            return Completed(tuple(argv), 0, "ddpctl 0.1.0\n", "")
        if line == "sinfo -V":
            return Completed(tuple(argv), 0, "slurm 22.05.8\n", "")
        done = login_shell("bash", line, self.home, **self.env)
        return Completed(tuple(argv), done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize(
    ("workdir", "make", "problem"),
    [
        ("$SCRATCH/ddp", True, None),
        ("$SCRATCH/ddp", False, "cluster 'gpu': workdir '$SCRATCH/ddp': bash: line 1: cd: "),
        ("$NOSUCH/ddp", False, "cluster 'gpu': workdir '$NOSUCH/ddp': bash: line 1: NOSUCH: parameter null or not set"),
    ],
)
def test_clusters_check_reaches_the_workdir(tmp_path: Path, workdir: str, make: bool, problem: str | None) -> None:
    sockets = Path(tempfile.mkdtemp(prefix="ctl-"))  # pytest's tmp_path is too deep for socket names
    scratch = tmp_path / "scratch"
    if make:
        (scratch / "ddp").mkdir(parents=True)
    cluster = Cluster("gpu", "me@login", workdir=workdir)
    env = {"DDPCTL_SSH_CONTROL_DIR": str(sockets / "ctl")}
    node = LoginNode(tmp_path, {"SCRATCH": str(scratch)})
    try:
        checked = check_cluster(cluster, Transport(cluster, runner=node, env=env), "0.1.0")
    finally:
        shutil.rmtree(sockets)
    if problem is None:
        assert (checked.problem, checked.workdir) == (None, str(scratch / "ddp"))
    else:
        assert checked.problem is not None and checked.problem.startswith(problem), checked
        assert checked.workdir is None


def test_the_probe_says_when_the_workdir_is_not_writable(tmp_path: Path) -> None:
    done = login_shell("bash", remote_command(WORKDIR_PROBE, "/"), tmp_path)
    if done.returncode == 0:  # root may write anywhere: nothing to refuse
        assert done.stdout.strip() == "/"
    else:
        assert "not writable by" in done.stderr
