"""`ddpctl sweep --cluster` against the real sshd on loopback of test_remote_sshd (its `login` fixture), the
local backend there: the code sent as `submit --cluster` sends it, the cluster's ddpctl runs the sweep (its queue),
the tasks recorded here under the cluster so that `list`, `status NAME`, `status NAME_1`, `logs NAME_1`,
`sweep results NAME` and `cancel NAME` go to it; `--dry-run` renders there; a spec's `cluster:` chooses it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import test_remote_sshd
from sshdtools import Login
from test_remote_sshd import project

login = test_remote_sshd.login  # the sshd fixture, found by pytest under its name here

SWEEP = ["--grid", "env.SEED=1,2", "--max-parallel", "2", "--name", "far-sw"]


def swept(login: Login, spec: Path, *extra: str) -> tuple[str, str]:
    """(the sweep's id on the cluster, what `sweep --cluster` printed)."""
    done = login.cli(str(spec), "--cluster", "login", *SWEEP, *extra, command="sweep")
    assert done.returncode == 0 and done.stderr == "", done
    return done.stdout.split("submitted sweep far-sw: ", 1)[1].split()[0], done.stdout


def wait_tasks_ended(login: Login, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while True:
        status: dict[str, Any] = json.loads(login.cli("--json", name, command="status").stdout)
        if all(task["state"] in ("COMPLETED", "FAILED") for task in status["tasks"]):
            return status
        assert time.monotonic() < deadline, f"the remote sweep did not end: {status}"
        time.sleep(0.5)


def test_sweep_on_a_cluster_is_recorded_here_and_its_tasks_answer_through_it(login: Login) -> None:
    spec = project(login, lines=2, delay=0)
    sweep, out = swept(login, spec)
    assert sweep.startswith("local-"), out
    assert "sent:     3 objects, " in out and "(0 already on login)" in out, out
    assert "status:   ddpctl status far-sw   (a task: ddpctl status far-sw_0; both ask login)" in out, out
    assert "cancel:" not in out  # the cluster's own hint names no cluster: not shown here
    laptop = login.home / "laptop-home" / "clusters" / "login" / "registry.jsonl"
    records = [json.loads(line) for line in laptop.read_text().splitlines()]
    assert [(r["job_id"], r["name"], r["sweep"], r["point"]) for r in records] == [
        (f"{sweep}_0", "far-sw", sweep, "env.SEED=1"),
        (f"{sweep}_1", "far-sw", sweep, "env.SEED=2"),
    ], records
    status = wait_tasks_ended(login, "far-sw")  # the sweep's name, asked of the cluster without --cluster
    assert [t["state"] for t in status["tasks"]] == ["COMPLETED", "COMPLETED"], status
    assert (login.home / "work" / "runs" / "far-sw" / f"{sweep}_1").is_dir()  # relative run_dir: the workdir

    whole = login.cli("--once", "far-sw", command="top")  # one run's view: the cluster names the tasks
    assert (whole.returncode, whole.stdout) == (2, ""), whole
    assert whole.stderr == (
        f"ddpctl: error: cluster 'login': top {sweep}: sweep far-sw (job array {sweep}) has 2 tasks; name one: "
        f"{sweep}_0, {sweep}_1 (or far-sw_<task>)\n"
    )
    task = login.cli("--json", "far-sw_1", command="status")
    assert json.loads(task.stdout)["job_id"] == f"{sweep}_1", task
    logs = login.cli("--no-color", "far-sw_1", command="logs")
    assert logs.returncode == 0, logs
    assert [line.split("] ", 1)[1] for line in logs.stdout.splitlines()][1:] == [
        "line 0 hello",
        "line 1 hello",
        "^[[31mred",
    ], logs.stdout
    results = login.cli("results", "--json", "far-sw", command="sweep")
    assert results.returncode == 0, results
    assert [json.loads(line)["state"] for line in results.stdout.splitlines()] == ["COMPLETED", "COMPLETED"]
    explicit = login.cli("results", "--cluster", "login", "--csv", "far-sw", command="sweep")
    assert explicit.returncode == 0 and explicit.stdout.startswith("point,run,run_dir,state,"), explicit

    listed = login.cli(command="list")
    assert listed.returncode == 0 and listed.stderr == "", listed
    _, line, *wrapped = listed.stdout.splitlines()  # one line for the sweep, its state cell wrapped under it
    first = line.split()
    assert first[:3] + first[-4:-2] == [sweep, "(sweep)", "far-sw", "local", "login"], listed.stdout
    state = " ".join(first[3:-4] + " ".join(wrapped).split())
    assert state == "2 tasks: 0 running / 0 pending / 2 completed / 0 failed", listed.stdout
    under = login.cli("--tasks", command="list").stdout.splitlines()
    assert [line.split()[:3] for line in under[-2:]] == [
        [f"{sweep}_0", "far-sw", "COMPLETED"],
        [f"{sweep}_1", "far-sw", "COMPLETED"],
    ], under

    again, out = swept(login, spec, "--set", "env.OTHER=1")
    assert again != sweep and "sent:     0 objects, 0 bytes (3 already on login)" in out, out


def test_sweep_tag_gives_the_same_sweep_and_dry_run_renders_on_the_cluster(login: Login) -> None:
    spec = project(login, lines=1, delay=0)
    tag = "cd" * 16
    first, _ = swept(login, spec, "--tag", tag)
    again, _ = swept(login, spec, "--tag", tag)  # as after a dropped connection: its outcome, no second sweep
    assert again == first
    remote = (login.home / "remote-home" / "registry.jsonl").read_text().splitlines()
    assert len(remote) >= 2 and all(first in line for line in remote[:2]), remote

    dry = login.cli(str(spec), "--cluster", "login", *SWEEP, "--dry-run", command="sweep")
    assert dry.returncode == 0, dry
    assert "env.SEED=1" in dry.stdout and "env.SEED=2" in dry.stdout, dry.stdout
    assert "sent:     0 objects, 0 bytes (3 already on login)" in dry.stdout, dry.stdout
    assert str(login.home / "work" / "runs" / "far-sw") in dry.stdout  # rendered there: the cluster's workdir
    # Issue 43 item 17: the dry run there refuses a backend the sweep refuses, as the sweep does.
    dry = login.cli(str(spec), "--cluster", "login", *SWEEP, "--set", "backend=submitit", "--dry-run", command="sweep")
    assert (dry.returncode, dry.stdout) == (2, ""), dry
    assert "backend submitit: sweeps are submitted on the sbatch and local backends only yet" in dry.stderr, dry


def test_a_specs_cluster_chooses_the_cluster_and_cancel_by_name_ends_the_whole_sweep_there(login: Login) -> None:
    spec = project(login, lines=100, delay=0.2)  # each task runs 20 s: cancelled while the first runs
    spec.write_text(spec.read_text() + "cluster: login\nsweep:\n  grid:\n    env.SEED: [1, 2, 3]\n")
    done = login.cli(str(spec), "--name", "in-file", command="sweep")
    assert done.returncode == 0, done
    sweep = done.stdout.split("submitted sweep in-file: ", 1)[1].split()[0]
    # The cluster's own words, said for here (issue 43 item 15): its login node, not the laptop.
    assert f"{sweep} on cluster 'login' (its login node), 3 points, 1 at a time" in done.stdout, done.stdout
    cancelled = login.cli("in-file", command="cancel")  # no --cluster: the name is a sweep recorded under login
    assert (cancelled.returncode, cancelled.stderr) == (0, ""), cancelled
    assert cancelled.stdout == f"cancelled sweep in-file: local queue {sweep}, 3 tasks\n"
    deadline = time.monotonic() + 30
    while (status := json.loads(login.cli("--json", "in-file", command="status").stdout))["tasks"][0]["state"] in (
        "RUNNING",
        "PENDING",
    ):
        assert time.monotonic() < deadline, status
        time.sleep(0.3)
    assert [task["state"] for task in status["tasks"]] == ["CANCELLED"] * 3, status
