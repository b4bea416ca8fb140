"""The login node of a remote submit answers its submission as fields (ddpctl.api.outcome: the job, its run dir,
the submit policy's warnings), not as the CLI's captured stdout: the laptop prints the same lines `submit` prints
on the cluster, from those fields, and the policy's warning reaches the laptop's stderr and `ddpctl.submit()`.

Nothing is started: the submission itself (api.submit_plan) is replaced, the policy before it runs as it would."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from clitools import write_spec

import ddpctl
from ddpctl import api
from ddpctl.api import remote
from ddpctl.api.handle import Job
from ddpctl.api.outcome import SubmitOutcome, outcome_from
from ddpctl.cli import remote_internal
from ddpctl.cli import submit as cli_submit
from ddpctl.errors import RemoteError
from ddpctl.remote.jobs import registry_of
from ddpctl.run.registry import JobRecord


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def login_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], Job]:
    """A spec whose script never listens for a stop, read as the login node reads the laptop's request; the
    submission replaced by a job of the local backend."""
    script = tmp_path / "train.py"
    script.write_text("print('trains, never listens for a stop')\n")
    path = write_spec(
        tmp_path / "far.yaml", name="far", script=str(script), run_dir=str(tmp_path / "runs"), backend="local"
    )
    job = Job(JobRecord("local-3", "far", str(tmp_path / "runs" / "far" / "local-3"), "local", 0.0))
    plans: list[Any] = []

    def submit_plan(plan: Any) -> Job:
        plans.append(plan)
        return job

    monkeypatch.setattr(remote_internal, "spec_of", lambda _request: api.spec_of(path))
    monkeypatch.setattr(api, "submit_plan", submit_plan)
    return plans, job


def test_the_login_node_answers_fields_and_the_laptop_prints_what_submit_prints_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plans, job = login_node(tmp_path, monkeypatch)
    answer = json.loads(json.dumps(remote_internal.submit_request({})))  # as it crosses the connection
    assert "lines" not in answer  # no captured output: the submission's own fields
    assert (answer["ok"], answer["job_id"], answer["run_dir"]) == (True, "local-3", str(job.run_dir))
    assert [w.split(": ", 1)[1][:31] for w in answer["warnings"]] == ["shows no sign of handling stops"]

    record, outcome = remote.recorded("login", "far.yaml", answer)
    assert [r.job_id for r in registry_of("login").records()] == ["local-3"] and record.run_dir == str(job.run_dir)
    cli_submit.submitted(argparse.Namespace(wait=False), (job, plans[0]))  # what `submit` prints on the cluster
    there = capsys.readouterr().out.splitlines()
    assert there[-1] == "logs:     ddpctl logs -f local-3"  # the laptop names the cluster in its own
    assert remote.shown_here(outcome, "login") == there[:-1]
    assert there[0] == "submitted far: job local-3 (local)" and there[2] == f"run dir:  {job.run_dir}"


def test_the_remote_policys_warning_reaches_python_as_a_local_ones_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    login_node(tmp_path, monkeypatch)
    answer = remote_internal.submit_request({})
    monkeypatch.setattr(remote, "chosen", lambda _name, _spec: None)
    handed = (object(), None, outcome_from(answer, "login"))
    monkeypatch.setattr(remote, "submit_on", lambda *_args, **_kw: handed)
    said: list[str] = []
    assert ddpctl.submit(tmp_path / "far.yaml", cluster="login", warn=said.append) is handed[0]
    assert said == answer["warnings"]
    with pytest.warns(UserWarning) as caught:
        ddpctl.submit(tmp_path / "far.yaml", cluster="login")
    assert [str(w.message) for w in caught] == said and caught[0].filename == __file__  # at the caller's line


def test_an_outcome_round_trips_and_a_wrong_one_is_one_line() -> None:
    outcome = SubmitOutcome("7", "far", "sbatch", "/r/far/7", "train.py", None, ("code: off",), ("w",), ("freed",))
    assert outcome_from({"ok": True, **outcome.as_json()}, "login") == outcome
    assert outcome.lines()[3:] == ["requeue:  disabled in the spec", "code: off", "freed"]
    with pytest.raises(RemoteError) as caught:
        outcome_from({**outcome.as_json(), "job_id": 7, "warnings": "w"}, "login")
    assert str(caught.value) == "cluster 'login': its submission answered no job_id, warnings as expected"
