"""The remote jobs recorded here (ddpctl.remote.jobs): found by id or name, their states read from a remote
`list --json`, the clusters asked side by side with a failure kept to its own line; the handle's state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpctl.api.remote import state_of
from ddpctl.errors import RemoteError
from ddpctl.remote.jobs import RemoteRecord, ask_all, find_recorded, parse_states, recorded, registry_of
from ddpctl.remote.profiles import Cluster
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState


def row(cluster: str, job_id: str, name: str, at: float) -> RemoteRecord:
    return RemoteRecord(cluster, JobRecord(job_id, name, "/far/run", "sbatch", at))


ROWS = [row("a", "11", "train", 1.0), row("b", "11", "other", 2.0), row("a", "12", "train", 3.0)]


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("12", ("a", "12")),
        ("train", ("a", "12")),  # a name: its newest submission
        ("11", ("b", "11")),  # the same id on two clusters: the newest
        ("other", ("b", "11")),
        ("nosuch", None),
    ],
)
def test_a_remote_job_is_found_by_id_then_by_name(ref: str, expected: tuple[str, str] | None) -> None:
    found = find_recorded(ref, ROWS)
    assert (None if found is None else (found.cluster, found.record.job_id)) == expected


@pytest.mark.parametrize(
    ("text", "states"),
    [
        (
            '{"job_id": "7", "state": "RUNNING"}\n{"job_id": "8", "state": "COMPLETED"}\n',
            {"7": "RUNNING", "8": "COMPLETED"},
        ),
        ('{"job_id": "7", "state": null}\n', {}),  # `list --no-state` there: no state to show
        ("not json\n[1, 2]\n" + '{"job_id": 7, "state": "RUNNING"}\n', {}),
        ('{"job_id": "7", "state": "RUN\\u001b[2JNING"}\n', {"7": "RUN^[[2JNING"}),  # made visible
        ("", {}),
    ],
)
def test_states_come_from_the_remote_list_json(text: str, states: dict[str, str]) -> None:
    assert parse_states(text) == states


def test_clusters_are_asked_side_by_side_and_a_failure_is_its_own_line(tmp_path: Path) -> None:
    profiles = {name: Cluster(name, f"{name}.example.org") for name in ("up", "down")}

    def ask(cluster: Cluster) -> dict[str, str]:
        if cluster.name == "down":
            raise RemoteError("cluster 'down': cannot reach down.example.org (Connection refused)")
        return {"5": "RUNNING"}

    listing = ask_all(["up", "down", "gone", "up"], profiles, ask, tmp_path / "clusters.yaml")
    assert listing.states == {"up": {"5": "RUNNING"}}
    assert listing.failures == [
        "cluster 'down': cannot reach down.example.org (Connection refused): its jobs are listed without a state",
        f"cluster 'gone': not in {tmp_path / 'clusters.yaml'} any more: its jobs are listed without a state",
    ]


def test_recorded_reads_each_clusters_registry(tmp_path: Path) -> None:
    env = {"DDPCTL_HOME": str(tmp_path)}
    assert recorded(env) == []
    registry_of("b", env).add(JobRecord("2", "y", "/r", "local", 2.0))
    registry_of("a", env).add(JobRecord("1", "x", "/r", "local", 1.0))
    (tmp_path / "clusters" / "-bad").mkdir()  # not a cluster's name: not read
    assert [(r.cluster, r.record.job_id) for r in recorded(env)] == [("a", "1"), ("b", "2")]


@pytest.mark.parametrize(
    ("data", "state"),
    [
        (
            {"state": "FAILED", "restarts": 2, "reason": "oom", "nodes": "n1", "elapsed": "1:00", "exit_code": 1},
            JobState("FAILED", 2, "oom", "n1", "1:00", 1),
        ),
        ({"state": "RUNNING", "exit_code": None, "restarts": "2"}, JobState("RUNNING")),
        ({"exit_code": True}, JobState("UNKNOWN")),
    ],
)
def test_a_remote_status_json_is_a_job_state(data: dict[str, object], state: JobState) -> None:
    assert state_of(json.loads(json.dumps(data))) == state


@pytest.mark.parametrize(
    ("ref", "where"),
    [
        ("both", None),  # a name of both: the local job wins, as before there were clusters
        ("far", ("gpu", "9")),  # by name: the cluster's newest of that name
        ("9", ("gpu", "9")),
        ("8", ("gpu", "8")),
        ("local-1", None),
        ("777", None),  # a local sweep's array job id: local
        ("nosuch", None),
    ],
)
def test_a_job_ref_goes_to_its_cluster_only_when_no_local_job_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str, where: tuple[str, str] | None
) -> None:
    import argparse

    from ddpctl import api
    from ddpctl.api.remote import RemoteJob
    from ddpctl.cli.common import remote_ref

    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path))
    local = Registry(tmp_path)
    local.add(JobRecord("local-1", "both", "/r", "local", 5.0))
    local.add(JobRecord("777_0", "sw", "/r", "sbatch", 5.0, sweep="777"))
    registry_of("gpu").add(JobRecord("8", "far", "/far", "sbatch", 1.0))
    registry_of("gpu").add(JobRecord("9", "far", "/far", "sbatch", 2.0))
    registry_of("gpu").add(JobRecord("10", "both", "/far", "sbatch", 3.0))
    args = argparse.Namespace(cluster=None, job=ref)
    assert remote_ref(args) == (where is not None)
    assert (args.cluster, args.job) == (where or (None, ref))
    if ref in ("nosuch", "777"):  # no job / a sweep: api.job has none (status and cancel take the sweep)
        return
    job = api.job(ref)  # the API finds the same job
    assert ((job.cluster, job.job_id) if isinstance(job, RemoteJob) else None) == where


def test_with_no_job_given_the_newest_of_all_is_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpctl import api
    from ddpctl.api.remote import RemoteJob

    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path))
    Registry(tmp_path).add(JobRecord("local-1", "near", "/r", "local", 5.0))
    registry_of("gpu").add(JobRecord("8", "far", "/far", "sbatch", 4.0))
    assert api.job().job_id == "local-1"
    registry_of("gpu").add(JobRecord("9", "far", "/far", "sbatch", 6.0))
    newest = api.job()
    assert isinstance(newest, RemoteJob) and (newest.cluster, newest.job_id) == ("gpu", "9")
