"""Issue 43 item 11: the MLflow run ddpctl created at submit ends with the run: FINISHED or FAILED when the run
finishes (ddpctl.node.batch.decide_run, on every backend), KILLED when it is cancelled (ddpctl.backends.control,
a sweep's never-started tasks included); a run the script ended itself keeps the status it gave. A real MLflow
file store; no MLFLOW_* variable set by the test."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from ddpctl.backends.control import close_trackers, control
from ddpctl.node.batch import decide_run
from ddpctl.run import tracking
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.spec import JobSpec, spec_to_mapping


@pytest.fixture(autouse=True)
def no_mlflow_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("MLFLOW_")]:
        monkeypatch.delenv(name)


def tracked_run(tmp_path: Path, name: str = "x", **spec: object) -> tuple[RunLayout, dict[str, str]]:
    """A run dir as submit leaves it, with its MLflow run created in <tmp>/runs/mlruns."""
    layout = RunLayout(tmp_path / "runs" / name / "1")
    layout.root.mkdir(parents=True)
    job = JobSpec(name=name, script="t.py", run_dir=str(tmp_path / "runs"), tracking=("mlflow",), **spec)  # type: ignore[arg-type]
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(job)))
    return layout, tracking.prepare(job, layout, {}, tmp_path)["mlflow"]


def status_of(mlflow: dict[str, str]) -> str:
    from mlflow.tracking import MlflowClient

    with tracking._mlflow_environ(mlflow["uri"], {}):
        return str(MlflowClient(tracking_uri=mlflow["uri"]).get_run(mlflow["run_id"]).info.status)


@pytest.mark.parametrize(("exit_code", "status"), [(0, "FINISHED"), (1, "FAILED")])
def test_a_finished_run_ends_its_tracker_run(tmp_path: Path, exit_code: int, status: str) -> None:
    layout, mlflow = tracked_run(tmp_path)
    assert status_of(mlflow) == "RUNNING"
    (layout.attempt_dir(0)).mkdir()
    assert decide_run(layout, {"SLURM_JOB_ID": "5"}, exit_code).action == "finish"
    assert status_of(mlflow) == status


def test_a_requeued_attempt_leaves_it_running(tmp_path: Path) -> None:
    layout, mlflow = tracked_run(tmp_path, requeue={"max_failures": 3})
    (layout.attempt_dir(0)).mkdir()
    assert decide_run(layout, {"SLURM_JOB_ID": "5"}, 1).action == "requeue"
    assert status_of(mlflow) == "RUNNING"


def test_a_cancelled_job_or_never_started_task_ends_it_killed(tmp_path: Path) -> None:
    layout, mlflow = tracked_run(tmp_path)
    record = JobRecord("local-3_1", "x", str(layout.root), "local", 0.0, sweep="local-3")
    control(record, "cancel", lambda: None, lambda _record: JobState("PENDING"))
    assert status_of(mlflow) == "KILLED"


def test_a_run_the_script_ended_keeps_its_status(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    layout, mlflow = tracked_run(tmp_path)
    with tracking._mlflow_environ(mlflow["uri"], {}):
        MlflowClient(tracking_uri=mlflow["uri"]).set_terminated(mlflow["run_id"], "FINISHED")
    close_trackers([JobRecord("9", "x", str(layout.root), "sbatch", 0.0)])
    assert status_of(mlflow) == "FINISHED"


def test_a_store_that_is_gone_is_one_line_not_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout, _ = tracked_run(tmp_path)
    shutil.rmtree(tmp_path / "runs" / "mlruns")
    close_trackers([JobRecord("9", "x", str(layout.root), "sbatch", 0.0)])
    err = capsys.readouterr().err
    assert err.startswith("ddpctl: warning: job 9 (x): tracking: mlflow: run ") and err.count("\n") == 1, err
