"""Remote jobs beside local ones, against the real sshd on loopback of test_remote_sshd (its `login` fixture):
`list` with a cluster column (and a cluster that cannot be reached: one line, local jobs still listed),
`status JOB` and `ddpctl.job(JOB)` finding a remote job without --cluster, and the Python API's
`ddpctl.submit(..., cluster=...)` handle: its status, wait, logs and cancel through the cluster's ddpctl."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import test_remote_sshd
from sshdtools import Login
from test_remote_sshd import job_of, project, wait_ended

from ddpctl.run.registry import JobRecord, Registry

login = test_remote_sshd.login  # the sshd fixture, found by pytest under its name here


def test_list_shows_local_and_remote_jobs_and_survives_an_unreachable_cluster(login: Login) -> None:
    spec = project(login, lines=1, delay=0)
    far = job_of(login.cli(str(spec), "--cluster", "login", command="submit"))
    wait_ended(login, far)
    laptop = login.home / "laptop-home"
    Registry(laptop).add(JobRecord("local-3", "near", str(login.home / "near-run"), "local", time.time()))
    listed = login.cli(command="list")
    assert listed.returncode == 0 and listed.stderr == "", listed
    head, *rows = listed.stdout.splitlines()
    assert head.split() == ["job", "name", "state", "backend", "cluster", "submitted"], listed.stdout
    assert [r.split()[:5] for r in rows] == [
        [far, "far", "COMPLETED", "local", "login"],  # its state as the cluster's ddpctl said it
        ["local-3", "near", "FAILED", "local", "-"],
    ], listed.stdout
    as_json = [json.loads(line) for line in login.cli("--json", command="list").stdout.splitlines()]
    assert [(j["job_id"], j["cluster"], j["state"]) for j in as_json] == [
        (far, "login", "COMPLETED"),
        ("local-3", None, "FAILED"),
    ]
    login.stop()
    started = time.monotonic()
    down = login.cli(command="list")
    assert time.monotonic() - started < 12
    assert down.returncode == 0, down
    assert down.stderr == (
        f"ddpctl: warning: cluster 'login': cannot reach login (connect to host 127.0.0.1 port {login.port}: "
        "Connection refused): its jobs are listed without a state\n"
    )
    assert [r.split()[:5] for r in down.stdout.splitlines()[1:]] == [
        [far, "far", "-", "local", "login"],
        ["local-3", "near", "FAILED", "local", "-"],
    ], down.stdout


API = """
import json, sys
import ddpctl
job = ddpctl.submit(sys.argv[1], cluster="login", overrides=["name=api"])
final = job.wait(timeout=60, poll_s=0.3)
again = ddpctl.job("api")
print(json.dumps({
    "repr": repr(job), "id": job.job_id, "state": final.state, "exit": final.exit_code,
    "found": repr(again), "lines": [line.text for line in again.logs(rank=0)],
    "followed": [line.text for line in again.logs(rank="0", follow=True)],  # the job ended: so does the follow
}))
"""


def test_the_python_api_submits_and_follows_a_job_on_the_cluster(login: Login) -> None:
    spec = project(login, lines=2, delay=0)
    argv = [sys.executable, "-c", API, str(spec)]
    done = subprocess.run(argv, capture_output=True, text=True, env=login.env(), timeout=120, check=False)
    assert done.returncode == 0, done
    got = json.loads(done.stdout)
    job = got["id"]
    assert got["repr"] == f"RemoteJob({job!r}, name='api', backend='local', cluster='login')"
    assert (got["state"], got["exit"]) == ("COMPLETED", 0)
    assert got["found"] == got["repr"]  # ddpctl.job finds it by name in the registry of the cluster's jobs
    assert got["lines"][1:] == ["line 0 hello", "line 1 hello", "\x1b[31mred"], got["lines"]
    assert got["followed"] == got["lines"]
    status = login.cli("api", command="status")  # no --cluster: the registry here says where it is
    assert status.returncode == 0 and status.stdout.startswith(f"{job}  api  COMPLETED"), status
    as_json = login.cli("--json", job, command="status")
    assert json.loads(as_json.stdout)["job_id"] == job, as_json
    newest = login.cli(command="status")  # no job given: the newest of all, here the cluster's
    assert newest.returncode == 0 and newest.stdout.startswith(f"{job}  api  COMPLETED"), newest
    logs = login.cli("--no-color", "--rank", "0", "api", command="logs")
    assert [line.split("] ", 1)[1] for line in logs.stdout.splitlines()][1:] == [*got["lines"][1:-1], "^[[31mred"]
    ended = login.cli(job, command="cancel")
    assert ended.returncode == 1 and ended.stderr.startswith("ddpctl: error: cluster 'login': "), ended
    assert not (login.home / "laptop-home" / "registry.jsonl").exists()  # nothing of it recorded as local


def test_dry_run_doctor_and_wait_with_a_cluster_run_there(login: Login) -> None:
    spec = project(login, lines=1, delay=0)
    clusters = login.home / "clusters.yaml"
    clusters.write_text(clusters.read_text() + "  defaults:\n    env: {FROM_PROFILE: 'yes'}\n")
    dry = login.cli(str(spec), "--cluster", "login", "--dry-run", command="submit")
    assert dry.returncode == 0, dry
    assert "\nFROM_PROFILE=yes\n" in dry.stdout  # rendered there, with the cluster's defaults
    assert f"DDPCTL_RUN_DIR={login.home}/work/runs/far/JOBID\n" in dry.stdout  # its work directory
    assert "sent:     3 objects, " in dry.stdout, dry
    remote_registry = login.home / "remote-home" / "registry.jsonl"
    assert not remote_registry.exists() and not (login.home / "laptop-home" / "clusters").exists()
    spec.write_text(spec.read_text() + "cluster: login\n")  # doctor goes where the spec says
    doctor = login.cli(str(spec), command="doctor")
    assert doctor.returncode == 0, doctor
    assert "[ok  ] backend: local\n" in doctor.stdout and "/remote-home/remote/trees/" in doctor.stdout, doctor
    assert doctor.stdout.endswith(" (2 already on login)\n"), doctor.stdout  # the changed spec file
    misspelt = login.cli(str(spec), "--cluster", "logn", command="doctor")
    assert (misspelt.returncode, misspelt.stdout) == (2, "")
    assert misspelt.stderr == f"ddpctl: error: unknown cluster 'logn' in {clusters}, did you mean 'login'?\n"
    assert not remote_registry.exists()
    waited = login.cli(str(spec), "--wait", command="submit")
    assert waited.returncode == 0, waited
    job = job_of(waited)
    assert waited.stdout.endswith(f"job {job} (far) on login: COMPLETED (training completed)\n"), waited.stdout
