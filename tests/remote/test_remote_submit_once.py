"""`internal remote-submit` is idempotent per tag whatever ends the submission (issue 43, suspected and
reproduced: an outcome was written only for a DdpctlError, so any other exception after the job was submitted
left no outcome, and the laptop's ask again with the same tag submitted a second job)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddpctl import __version__
from ddpctl.cli.remote_internal import submit_once, submit_request
from ddpctl.remote.receive import outcome_path

TAG = "cd" * 16


@pytest.fixture(autouse=True)
def cluster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))


def request() -> dict[str, Any]:
    return {"version": __version__, "tree": [], "spec": "job.yaml", "text": "name: x\n"}


def test_a_submission_that_dies_after_submitting_is_never_submitted_again() -> None:
    submitted: list[str] = []

    def dies_after_submitting(_request: dict[str, Any]) -> dict[str, Any]:
        submitted.append("job 1")
        raise KeyboardInterrupt  # or a kill: nothing after the submit itself runs

    with pytest.raises(KeyboardInterrupt):
        submit_once(outcome_path(TAG), request, dies_after_submitting)

    def second(_request: dict[str, Any]) -> dict[str, Any]:
        submitted.append("job 2")
        return {"ok": True}

    again = submit_once(outcome_path(TAG), request, second)
    assert submitted == ["job 1"]
    assert again["ok"] is False and f"the submission tagged {TAG} started at " in again["error"]
    assert "it may have submitted a job" in again["error"]


def test_any_exception_of_a_submission_is_its_outcome() -> None:
    broken = {**request(), "tree": [["l", "link", 0, "x", 0, "?"]]}  # not [path, kind, mode, id or target, size]
    outcome = submit_request(broken)
    assert outcome["ok"] is False and outcome["code"] == 1
    assert outcome["error"].startswith("remote submit failed: ValueError: ")
    assert submit_once(outcome_path(TAG), lambda: broken) == outcome
    assert submit_once(outcome_path(TAG), lambda: pytest.fail("read again")) == outcome  # kept under the tag
