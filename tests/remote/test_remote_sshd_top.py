"""The live `ddpctl top` of a remote job in a real pseudo-terminal (pexpect, 80x24) against the real sshd on
loopback of test_remote_sshd (its `login` fixture), the local backend there: the frames come from the cluster's
`top --once --json` and are drawn here; a connection that cannot be made is one line under the last frame and
asked again; the screen ends by itself with the job. `top --once --json` is one JSON object."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import test_remote_sshd
from sshdtools import Login, free_port
from test_remote_sshd import job_of, master_pid, project

pexpect = pytest.importorskip("pexpect")

login = test_remote_sshd.login  # the sshd fixture, found by pytest under its name here


def test_live_top_of_a_remote_job_survives_a_lost_connection_and_ends_with_the_job(login: Login) -> None:
    spec = project(login, lines=80, delay=0.25)  # 20 s of output
    job = job_of(login.cli(str(spec), "--cluster", "login", command="submit"))
    top = pexpect.spawn(
        sys.executable,
        ["-m", "ddpctl", "top", job, "--interval", "1"],  # no --cluster: a job recorded here under login
        env=login.env(),
        dimensions=(24, 80),
        encoding="utf-8",
        timeout=60,
    )
    config = login.home / "ssh_config"
    kept = config.read_text()
    try:
        top.expect(rf"{job} far RUNNING \| attempt 0")
        top.expect(r"line \d+ hello")  # a rank's last log line, from the cluster's run dir
        master = master_pid(login)  # (its socket's name hashes the port: asked before the port changes)
        config.write_text(kept.replace(f"Port {login.port}", f"Port {free_port()}"))  # nothing listens there
        os.kill(master, 15)  # the shared connection goes: the next ask connects anew, and cannot
        top.expect(r"asking again in 1 s: cluster 'login': cannot reach login \(connect to host")
        config.write_text(kept)
        top.expect(r"RUNNING \| attempt 0")  # asked again: frames again
        top.expect(rf"job {job} ended: COMPLETED")
        top.expect(pexpect.EOF)
    finally:
        config.write_text(kept)
        top.close(force=True)
    assert top.exitstatus == 0
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", top.before or "")
    assert "Traceback" not in screen and all(len(line) <= 80 for line in screen.splitlines())

    once = login.cli("--once", "--json", job, command="top")
    assert once.returncode == 0, once
    data = json.loads(once.stdout)
    assert (data["job_id"], data["name"], data["state"]["state"], data["attempt"]) == (job, "far", "COMPLETED", 0)
    assert [row["rank"] for row in data["rows"]] == [0] and data["rows"][0]["line"].endswith("red"), data


def test_live_top_of_an_unknown_remote_job_is_one_line(login: Login) -> None:
    project(login, lines=1, delay=0)
    done = login.cli("--cluster", "login", "nosuch", command="top")
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr.startswith("ddpctl: error: cluster 'login': ") and "nosuch" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
