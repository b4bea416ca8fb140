"""Issue 43 item 15: what the cluster's ddpctl says is shown here, where its own hints would mislead (`logs:
ddpctl logs local-1` opened a different, local job of the laptop; a remote local-backend sweep said "on this
machine"), and a remote job whose id a local job (or another cluster's) also has is listed as CLUSTER:ID, a
reference every command takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clitools import Cli

from ddpctl.cli.remote_list import remote_lines
from ddpctl.proc import Completed
from ddpctl.remote.jobs import RemoteRecord, find_recorded, registry_of
from ddpctl.remote.passthrough import Answer, answer, for_here
from ddpctl.remote.profiles import Cluster
from ddpctl.run.registry import JobRecord, Registry

GPU = Cluster("gpu", "me@login")


@pytest.mark.parametrize(
    ("there", "here"),
    [
        (
            "  logs: ddpctl logs local-1 --attempt all; checkpoints: /s/ck",
            "  logs: ddpctl logs --cluster gpu local-1 --attempt all; checkpoints: /s/ck",
        ),
        (
            "sent the preemption warning to job 12 (x); follow with `ddpctl logs -f 12`",
            "sent the preemption warning to job 12 (x); follow with `ddpctl logs --cluster gpu -f 12`",
        ),
        ("status:   ddpctl status 7   (a task: ddpctl status 7_0)", None),  # said again below
        (
            "submitted sweep s: local-2 on this machine, 2 points, 1 at a time (a detached queue starts them; "
            "nothing stays in this terminal)",
            "submitted sweep s: local-2 on cluster 'gpu' (its login node), 2 points, 1 at a time (a detached queue "
            "starts them; nothing stays in this terminal)",
        ),
        ("results:  ddpctl sweep results s", "results:  ddpctl sweep results --cluster gpu s"),
        ("ddpctl: WARNING: rank 3 is slow", "ddpctl: WARNING: rank 3 is slow"),
    ],
)
def test_the_clusters_hints_are_said_for_here(there: str, here: str | None) -> None:
    if here is None:
        assert (
            for_here(there, "gpu")
            == "status:   ddpctl status --cluster gpu 7   (a task: ddpctl status --cluster gpu 7_0)"
        )
    else:
        assert for_here(there, "gpu") == here


def test_a_text_answer_is_said_for_here() -> None:
    done = Completed(("ssh",), 0, "local-1  x  COMPLETED\n  logs: ddpctl logs local-1 --attempt all\n", "")
    assert answer(GPU, done, "0.1.0", as_json=False) == Answer(
        "local-1  x  COMPLETED\n  logs: ddpctl logs --cluster gpu local-1 --attempt all"
    )


def record(job_id: str, name: str, at: float, sweep: str | None = None) -> JobRecord:
    return JobRecord(job_id, name, "/far/run", "local", at, sweep=sweep)


def test_a_remote_id_a_local_job_also_has_is_listed_and_found_as_cluster_colon_id() -> None:
    rows: list[tuple[str, Any, str | None]] = [
        ("gpu", record("local-1", "far", 1.0), None),
        ("gpu", record("local-2", "far2", 2.0), None),
        ("cpu", record("local-2", "far3", 3.0), None),
        ("cpu", record("local-5_0", "sw", 4.0, "local-5"), None),
        ("cpu", record("local-5_1", "sw", 4.0, "local-5"), None),
    ]
    shown = [line[2] for line in remote_lines(rows, each_task=False, under=True, taken={"local-1", "local-5"})]
    assert shown == [
        "gpu:local-1",
        "gpu:local-2",
        "cpu:local-2",
        "cpu:local-5 (sweep)",
        "  cpu:local-5_0",
        "  cpu:local-5_1",
    ]
    remote = [RemoteRecord(cluster, rec) for cluster, rec, _ in rows]
    for ref, expected in [("gpu:local-2", ("gpu", "local-2")), ("cpu:local-2", ("cpu", "local-2")),
                          ("cpu:sw_1", ("cpu", "local-5_1")), ("gpu:sw_1", None), ("nope:local-1", None)]:  # fmt: skip
        found = find_recorded(ref, remote)
        assert (None if found is None else (found.cluster, found.job_ref)) == expected, ref


def test_list_and_status_of_a_colliding_remote_job(tmp_path: Path) -> None:
    """Through the real CLI: `list` names the remote job gpu:local-1, and `status gpu:local-1` asks gpu (here:
    no gpu profile, so the one line that says so, not the local job's status)."""
    env = {"DDPCTL_HOME": str(tmp_path / "home")}
    Registry(tmp_path / "home").add(JobRecord("local-1", "mine", str(tmp_path), "local", 1.0))
    registry_of("gpu", env).add(JobRecord("local-1", "far", "/far/run", "local", 2.0))
    cli = Cli(tmp_path / "home", cwd=tmp_path, extra_env={"DDPCTL_CLUSTERS": str(tmp_path / "clusters.yaml")})
    listed = cli.run("list", "--no-state").stdout.splitlines()
    assert [line.split()[0] for line in listed[1:]] == ["local-1", "gpu:local-1"], listed
    rows = [json.loads(line) for line in cli.run("list", "--json", "--no-state").stdout.splitlines()]
    assert [(r["job_id"], r["cluster"]) for r in rows] == [("local-1", None), ("local-1", "gpu")]
    done = cli.run("status", "gpu:local-1", check=False)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr.startswith("ddpctl: error: unknown cluster 'gpu'"), done.stderr
