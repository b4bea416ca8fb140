"""Tracker identities (ddpctl.run.tracking): the ranks' environment from tracking.json (pure, literal tables),
the MLflow store a run is created in, and the run created at submit withdrawn when the submit fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddpctl.run import tracking
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import staging
from ddpctl.spec import JobSpec

RUN = RunLayout(Path("/runs/job/12"))


@pytest.mark.parametrize(
    ("record", "given", "expected"),
    [
        ({}, {}, []),
        (
            {"wandb": {"id": "abc123"}, "group": None},
            {},
            [("WANDB_RUN_ID", "abc123"), ("WANDB_RESUME", "allow"), ("WANDB_DIR", "/runs/job/12")],
        ),
        (  # a sweep's task: the sweep is the group; the user's own WANDB_DIR is kept
            {"wandb": {"id": "abc123"}, "group": "lr-sweep"},
            {"WANDB_DIR": "/scratch/wb"},
            [("WANDB_RUN_ID", "abc123"), ("WANDB_RESUME", "allow"), ("WANDB_RUN_GROUP", "lr-sweep")],
        ),
        (
            {"mlflow": {"run_id": "f00", "uri": "file:///s/mlruns", "experiment_id": "1"}},
            {},
            [
                ("MLFLOW_RUN_ID", "f00"),
                ("MLFLOW_TRACKING_URI", "file:///s/mlruns"),
                ("MLFLOW_ALLOW_FILE_STORE", "true"),
            ],
        ),
        (  # the user's own word on the file store is kept; a server store needs nothing
            {"mlflow": {"run_id": "f00", "uri": "file:///s/mlruns"}},
            {"MLFLOW_ALLOW_FILE_STORE": "false"},
            [("MLFLOW_RUN_ID", "f00"), ("MLFLOW_TRACKING_URI", "file:///s/mlruns")],
        ),
        (
            {"mlflow": {"run_id": "f00", "uri": "http://mlflow:5000"}},
            {},
            [("MLFLOW_RUN_ID", "f00"), ("MLFLOW_TRACKING_URI", "http://mlflow:5000")],
        ),
        ({"tensorboard": True}, {}, [("DDPCTL_TENSORBOARD_DIR", "/runs/job/12/tensorboard")]),
        # A damaged record gives nothing rather than a wrong identity.
        ({"wandb": {"id": 5}, "mlflow": {"run_id": "f00"}, "tensorboard": False}, {}, []),
    ],
)
def test_rank_env(record: dict[str, Any], given: dict[str, str], expected: list[tuple[str, str]]) -> None:
    assert tracking.rank_env(record, RUN, given) == expected


@pytest.mark.parametrize(
    ("spec_env", "environ", "expected"),
    [
        ({}, {}, "file:///work/runs/mlruns"),  # a file store in the run_dir: mlflow-skinny has no sqlite: store
        ({}, {"MLFLOW_TRACKING_URI": "http://mlflow:5000"}, "http://mlflow:5000"),
        ({"MLFLOW_TRACKING_URI": "mlruns"}, {"MLFLOW_TRACKING_URI": "http://x"}, "file:///work/mlruns"),
        ({"MLFLOW_TRACKING_URI": "/s/mlruns"}, {}, "file:///s/mlruns"),
        ({"MLFLOW_TRACKING_URI": "file:///s/mlruns"}, {}, "file:///s/mlruns"),
        ({"MLFLOW_TRACKING_URI": "databricks"}, {}, "file:///work/databricks"),  # a bare word is a path too
    ],
)
def test_mlflow_store(spec_env: dict[str, str], environ: dict[str, str], expected: str) -> None:
    spec = JobSpec(name="j", script="t.py", run_dir="runs", env=tuple(spec_env.items()))
    assert tracking.mlflow_uri(spec, environ, Path("/work")) == expected


def test_nothing_is_written_without_tracking(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    assert tracking.prepare(JobSpec(name="j", script="t.py"), layout, {}, tmp_path) == {}
    assert not layout.tracking_file.exists() and tracking.read(layout) == {}


def test_a_failed_submit_deletes_the_mlflow_run_it_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient  # the dev extra installs it

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # only the spec's env may set it here
    (tmp_path / "t.py").write_text("")
    store = (tmp_path / "mlruns").as_uri()
    env = (("MLFLOW_TRACKING_URI", store), ("MLFLOW_ALLOW_FILE_STORE", "true"))
    spec = JobSpec(name="j", script=str(tmp_path / "t.py"), run_dir=str(tmp_path / "runs"), env=env)
    spec = JobSpec(**{**spec.__dict__, "tracking": ("mlflow", "wandb"), "snapshot": "off"})
    with pytest.raises(RuntimeError, match="sbatch failed"), staging(spec, None) as stage:
        record = tracking.read(stage)
        assert record["wandb"]["id"] and record["mlflow"]["uri"] == store
        raise RuntimeError("sbatch failed")  # what a submit that fails after staging sees
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # the spec's MLflow settings were lent, not left
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=store)
    found = client.get_run(record["mlflow"]["run_id"])
    assert found.info.lifecycle_stage == "deleted"
    assert not list((tmp_path / "runs" / "j").iterdir())  # the staging dir is gone too


RANK = """\
import mlflow
mlflow.start_run()
mlflow.log_metric("loss", 0.5, step=3)
mlflow.end_run()
"""


def test_the_documented_default_store_works_with_mlflow_skinny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43 item 10: `tracking: [mlflow]` and nothing else (no MLFLOW_* anywhere, MLFLOW_ALLOW_FILE_STORE
    included) failed at submit with mlflow-skinny: its default `sqlite:` store needs SQLAlchemy. The run is
    created at submit, a rank given only rank_env's variables logs to it, and the submitter reads it back."""
    from mlflow.tracking import MlflowClient

    for name in [name for name in os.environ if name.startswith("MLFLOW_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("")
    spec = JobSpec(name="j", script=str(tmp_path / "t.py"), run_dir="runs", tracking=("mlflow",), snapshot="off")
    layout = RunLayout(tmp_path / "runs" / "j" / "1")
    layout.root.mkdir(parents=True)
    record = tracking.prepare(spec, layout, {}, tmp_path)
    assert record["mlflow"]["uri"] == (tmp_path / "runs" / "mlruns").as_uri()
    assert not any(name.startswith("MLFLOW_") for name in os.environ)  # lent while the run was made, not left
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **dict(tracking.rank_env(record, layout, {}))}
    done = subprocess.run([sys.executable, "-c", RANK], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    with tracking._mlflow_environ(record["mlflow"]["uri"], {}):
        run = MlflowClient(tracking_uri=record["mlflow"]["uri"]).get_run(record["mlflow"]["run_id"])
    assert (run.info.status, run.data.metrics) == ("FINISHED", {"loss": 0.5})
