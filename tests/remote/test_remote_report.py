"""`report --cluster`: the cluster's ddpctl writes the page (`--output=-`), this one checks it and writes it here.
The check as a literal table (a page made by ddpctl's own report passes; a page with anything active, or
without the report's lock-down, is refused), then the real thing against the real sshd on loopback of
test_remote_sshd (its `login` fixture), the local backend there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import test_remote_sshd
from sshdtools import Login
from test_remote_sshd import job_of, project, wait_ended

from ddpctl.health import htmlreport, runreport
from ddpctl.remote.passthrough import report_problem

login = test_remote_sshd.login  # the sshd fixture, found by pytest under its name here

CSP = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';">'


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("<html><body>hi</body></html>", "it printed no HTML page"),
        ("<!DOCTYPE html><html><body>hi</body></html>", "its page lacks the report's Content-Security-Policy"),
        (f"<!DOCTYPE html><head>{CSP}</head><SCRIPT>alert(1)</script>", "its page holds active content ('<SCRIPT')"),
        (f"<!DOCTYPE html><head>{CSP}</head><img src=x onerror=alert(1)>", "its page holds active content"),
        (f'<!DOCTYPE html><head>{CSP}</head><a href="javascript:x()">', "its page holds active content"),
        (f"<!DOCTYPE html><head>{CSP}</head><iframe src=x>", "its page holds active content ('<iframe')"),
    ],
)
def test_a_fetched_report_is_refused_when_it_is_not_a_quiet_page(page: str, problem: str) -> None:
    found = report_problem(page)
    assert found is not None and found.startswith(problem), found


def test_ddpctls_own_report_is_a_quiet_page(tmp_path: Path) -> None:
    head = htmlreport.Header(name="far<x>", job_id="1", state="COMPLETED", reason="done", backend="local", code="")
    assert report_problem(htmlreport.run_page(head, runreport.collect(tmp_path))) is None


def test_the_report_of_a_remote_job_is_written_here(login: Login) -> None:
    spec = project(login, lines=3, delay=0)
    job = job_of(login.cli(str(spec), "--cluster", "login", command="submit"))
    wait_ended(login, job)
    out = login.home / "here.html"
    done = login.cli("--cluster", "login", job, "-o", str(out), command="report")
    assert done.returncode == 0 and done.stdout == f"{out}\n", done
    page = out.read_text()
    assert report_problem(page) is None and "far" in page and "COMPLETED" in page
    # A job submitted from here needs no --cluster; the default file is named for the cluster and the job.
    again = subprocess.run(
        login.argv(job, command="report"),
        cwd=login.home,
        env=login.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (again.returncode, again.stdout) == (0, f"report-login-{job}.html\n"), again
    assert report_problem((login.home / f"report-login-{job}.html").read_text()) is None
    unknown = login.cli("--cluster", "login", "nosuch", command="report")
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1, unknown
    assert unknown.stderr.startswith("ddpctl: error: cluster 'login': "), unknown.stderr
