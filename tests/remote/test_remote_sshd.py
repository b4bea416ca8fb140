"""`ddpctl clusters` against a real sshd (Debian's openssh-server) on loopback (tests/sshdtools.py's `Login`):
a host key and a user key made by the test, an ssh_config file of its own (DDPCTL_SSH_CONFIG, ssh -F), the real
ssh client and its multiplexed connection. sshd runs in a PID namespace of its own (unshare), so stopping it ends
every session process too."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshdtools import Login, ensure_sshd, keygen

from ddpctl import __version__
from ddpctl.run.registry import JobRecord, Registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def login(tmp_path: Path) -> Iterator[Login]:
    ensure_sshd()
    sockets = Path(tempfile.mkdtemp(prefix="ctl-"))  # pytest's tmp_path is too deep for socket names
    with contextlib.ExitStack() as cleanup:  # also when a key or sshd fails to start
        cleanup.callback(shutil.rmtree, sockets, ignore_errors=True)
        node = Login(tmp_path, sockets)
        cleanup.callback(node.stop)  # the connection's master sees it close and exits
        node.start()
        yield node


def expected_ok() -> str:
    """The line of a healthy login node: this machine is it, with or without Slurm's commands."""
    return f"login  login  ok  ddpctl {__version__}  slurm " if shutil.which("sinfo") else "no Slurm commands (sinfo)"


def test_check_reaches_the_login_node_over_one_shared_connection(login: Login) -> None:
    first = login.cli("--check")
    second = login.cli("--check")
    for done in (first, second):
        assert expected_ok() in done.stdout, done
        assert done.returncode == (0 if shutil.which("sinfo") else 1), done
    # Both runs, four remote commands, one login: the later ones went over the first one's connection.
    assert login.log().count("Accepted publickey") == 1, login.log()
    control = login.sockets / "ctl"
    assert stat.S_IMODE(control.stat().st_mode) == 0o700
    assert [stat.S_ISSOCK(p.lstat().st_mode) for p in control.iterdir()] == [True]
    listed = login.cli()
    assert listed.stdout.startswith(f"login  login  env PYTHONPATH={ROOT} DDPCTL_HOME="), listed


def test_status_of_a_remote_job_is_the_remote_ddpctls_answer(login: Login) -> None:
    remote_home = login.home / "remote-home"
    Registry(remote_home).add(JobRecord("local-7", "far", str(login.home / "run"), "local", 0.0))
    as_json = login.cli("--cluster", "login", "--json", "far", command="status")
    assert as_json.returncode == 0, as_json
    assert json.loads(as_json.stdout)["job_id"] == "local-7"
    as_text = login.cli("--cluster", "login", "far", command="status")
    assert as_text.stdout.startswith("local-7  far  FAILED"), as_text
    unknown = login.cli("--cluster", "login", "nosuch", command="status")
    assert (unknown.returncode, unknown.stdout) == (2, ""), unknown
    assert unknown.stderr.startswith("ddpctl: error: cluster 'login': job 'nosuch': no such job id or name in the ")
    assert unknown.stderr.count("\n") == 1
    assert not (login.home / "laptop-home" / "registry.jsonl").exists()


def test_a_changed_host_key_is_refused_in_one_line(login: Login) -> None:
    spec = project(login, lines=1, delay=0)
    login.trust(keygen(login.home / "other_key"))
    submit = login.cli(str(spec), "--cluster", "login", command="submit")
    assert (submit.returncode, submit.stdout) == (1, ""), submit
    assert submit.stderr.startswith("ddpctl: error: cluster 'login': the host key of login does not match your ")
    assert submit.stderr.count("\n") == 1
    done = login.cli("--check")
    assert done.returncode == 1 and done.stdout.count("\n") == 1, done
    assert "login  login  FAILED  cluster 'login': the host key of login does not match your known_hosts" in done.stdout
    assert "Accepted publickey" not in login.log()


def test_a_stopped_sshd_is_unreachable_within_the_bound(login: Login) -> None:
    assert login.cli("--check").stdout.count(" ok ") == 1
    login.stop()
    started = time.monotonic()
    done = login.cli("--check")
    took = time.monotonic() - started
    assert done.returncode == 1 and done.stdout.count("\n") == 1, done
    refused = f"cluster 'login': cannot reach login (connect to host 127.0.0.1 port {login.port}: Connection refused)"
    assert refused in done.stdout
    assert took < 10, took
    started = time.monotonic()
    logs = login.cli("-f", "--cluster", "login", "far", command="logs")  # not retried: there was no connection
    assert time.monotonic() - started < 10
    assert (logs.returncode, logs.stderr) == (1, f"ddpctl: error: {refused}\n"), logs


def test_a_missing_remote_ddpctl_and_an_unknown_cluster_name(login: Login) -> None:
    (login.home / "clusters.yaml").write_text("login:\n  ssh: login\n  ddpctl: /nonexistent/ddpctl\n")
    done = login.cli("--check")
    assert done.returncode == 1, done
    assert (
        f"cluster 'login': no '/nonexistent/ddpctl' on login: install ddpctl {__version__} there "
        f"(pip install ddpctl=={__version__})" in done.stdout
    )
    misspelt = login.cli("job.yaml", "--cluster", "logn", command="submit")
    assert (
        misspelt.stderr
        == f"ddpctl: error: unknown cluster 'logn' in {login.home / 'clusters.yaml'}, did you mean 'login'?\n"
    )
    unknown = login.cli("--check", "logn")
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr == (
        f"ddpctl: error: unknown cluster 'logn' in {login.home / 'clusters.yaml'}, did you mean 'login'?\n"
    )


TRAIN = """
import time
from lib.words import WORD
for i in range(LINES):
    print(f"line {i} {WORD}", flush=True)
    time.sleep(DELAY)
print("\\x1b[31mred", flush=True)
"""


def project(login: Login, lines: int, delay: float) -> Path:
    """A laptop's code: the script imports a module beside it (the whole tree goes); the spec in jobs/ names
    the script relative to itself. The cluster's work directory is where relative run dirs go."""
    code = login.home / "project"
    (code / "lib").mkdir(parents=True)
    (code / "jobs").mkdir()
    (code / "lib" / "words.py").write_text("WORD = 'hello'\n")
    (code / "train.py").write_text(TRAIN.replace("LINES", str(lines)).replace("DELAY", str(delay)))
    (code / "jobs" / "job.yaml").write_text("name: far\nscript: ../train.py\nbackend: local\n")
    (login.home / "work").mkdir()
    profile = f"login:\n  ssh: login\n  ddpctl: {login.remote}\n  workdir: {login.home}/work\n"
    (login.home / "clusters.yaml").write_text(profile)
    return code / "jobs" / "job.yaml"


def job_of(submitted: subprocess.CompletedProcess[str]) -> str:
    assert submitted.returncode == 0, submitted
    return submitted.stdout.split(": job ", 1)[1].split()[0]


def wait_ended(login: Login, job: str) -> None:
    deadline = time.monotonic() + 60
    while json.loads(login.cli("--cluster", "login", "--json", job, command="status").stdout)["state"] not in (
        "COMPLETED",
        "FAILED",
    ):
        assert time.monotonic() < deadline, "the remote job did not end"
        time.sleep(0.3)


def test_submit_sends_only_the_code_the_cluster_lacks_and_logs_come_through_it(login: Login) -> None:
    spec = project(login, lines=3, delay=0)
    tag = "ab" * 16
    first = login.cli(str(spec), "--cluster", "login", "--tag", tag, command="submit")
    job = job_of(first)
    assert "sent:     3 objects, " in first.stdout and "(0 already on login)" in first.stdout, first
    assert f"logs:     ddpctl logs -f --cluster login {job}\n" in first.stdout
    said = first.stdout.splitlines()  # from the fields the login node answered, as `submit` says them there
    assert [line[:10] for line in said[:4]] == ["submitted ", "script:   ", "run dir:  ", "requeue:  "], said
    assert said[0] == f"submitted far: job {job} (local)" and said[2].endswith(f"/work/runs/far/{job}"), said
    # The submit policy's warning, given on the login node, is said here as a submit here says it.
    assert first.stderr.startswith("ddpctl: warning: ") and "shows no sign of handling stops" in first.stderr
    assert first.stderr.count("\n") == 1, first.stderr
    # Asked again with its tag (as after a dropped connection): the same job, not a second one.
    again = login.cli(str(spec), "--cluster", "login", "--tag", tag, command="submit")
    assert job_of(again) == job
    wait_ended(login, job)
    unchanged = login.cli(str(spec), "--cluster", "login", "--allow-duplicate", command="submit")
    assert "sent:     0 objects, 0 bytes (3 already on login)" in unchanged.stdout, unchanged
    assert job_of(unchanged) != job
    remote_jobs = (login.home / "remote-home" / "registry.jsonl").read_text().splitlines()
    laptop = (login.home / "laptop-home" / "clusters" / "login" / "registry.jsonl").read_text()
    assert len(remote_jobs) == 2 and laptop.count('"far"') == 3, (remote_jobs, laptop)
    assert (login.home / "work" / "runs" / "far" / job).is_dir()  # a relative run_dir: in the work directory

    logs = login.cli("--cluster", "login", "--no-color", job, command="logs")
    assert logs.returncode == 0, logs
    lines = [line.split("] ", 1)[1] for line in logs.stdout.splitlines()]
    assert lines[0].startswith("[ddpctl.worker] rank=0 attempt=0 node=")
    assert lines[1:] == ["line 0 hello", "line 1 hello", "line 2 hello", "^[[31mred"], logs.stdout


def master_pid(login: Login) -> int:
    done = subprocess.run(
        ["ssh", "-F", str(login.home / "ssh_config"), "-o", f"ControlPath={login.sockets}/ctl/%C", "-O", "check",
         "login"], capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    return int(done.stderr.split("pid=", 1)[1].split(")")[0])


def test_a_dropped_connection_during_logs_f_continues_without_a_line_twice(login: Login) -> None:
    spec = project(login, lines=40, delay=0.1)
    job = job_of(login.cli(str(spec), "--cluster", "login", command="submit"))
    argv = [sys.executable, "-m", "ddpctl", "logs", "-f", "--no-color", "--cluster", "login", job]
    follow = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=login.env())
    assert follow.stdout is not None
    seen = []
    for line in follow.stdout:
        seen.append(line)
        if "line 5 " in line:
            break
    os.kill(master_pid(login), 15)  # the shared connection goes, and the remote logs -f with it
    rest, err = follow.communicate(timeout=60)
    texts = [line.split("] ", 1)[1] for line in "".join(seen).splitlines() + rest.splitlines()]
    assert texts[1:] == [*(f"line {i} hello" for i in range(40)), "^[[31mred"], (texts, err)
    assert "reconnecting" in err and follow.returncode == 0, err


def test_cluster_in_the_spec_chooses_the_cluster_and_the_command_line_wins(login: Login) -> None:
    spec = project(login, lines=1, delay=0)
    spec.write_text(spec.read_text() + "cluster: login\n")
    chosen = login.cli(str(spec), command="submit")
    job = job_of(chosen)
    assert "sent:     3 objects, " in chosen.stdout, chosen
    laptop = login.home / "laptop-home"
    assert job in (laptop / "clusters" / "login" / "registry.jsonl").read_text()
    assert not (laptop / "registry.jsonl").exists()  # nothing submitted here
    spec.write_text(spec.read_text().replace("cluster: login", "cluster: logn"))
    misspelt = login.cli(str(spec), command="submit")
    assert (misspelt.returncode, misspelt.stdout) == (2, ""), misspelt
    clusters = login.home / "clusters.yaml"
    assert (
        misspelt.stderr
        == f"ddpctl: error: {spec}: cluster: unknown cluster 'logn' in {clusters}, did you mean 'login'?\n"
    )
    wait_ended(login, job)
    wins = login.cli(str(spec), "--cluster", "login", "--allow-duplicate", command="submit")
    assert "sent:     1 objects, " in wins.stdout and "(2 already on login)" in wins.stdout, wins  # the spec changed
