"""One experiment-tracker identity per run, whatever its attempts (spec key `tracking`).

A requeued, chained or restarted attempt is the same run to the researcher, so it must be the same W&B or MLflow
run and the same TensorBoard directory. At submit `prepare` fixes the identities in the run dir's tracking.json
(for MLflow it creates the run there, in the store the user configured, since only a run that exists can be
resumed by id); every attempt's ranks get them as the environment each library reads (`rank_env`, pure):

- wandb: WANDB_RUN_ID + WANDB_RESUME=allow (+ WANDB_RUN_GROUP for a sweep's tasks; WANDB_DIR under the run dir
  unless the user set one), so `wandb.init()` on rank 0 resumes the one run;
- mlflow: MLFLOW_RUN_ID and MLFLOW_TRACKING_URI, so `mlflow.start_run()` resumes the run created at submit;
- tensorboard: DDPCTL_TENSORBOARD_DIR, one directory for all attempts (`SummaryWriter(dir, purge_step=step)`
  drops what an interrupted attempt logged past the checkpoint it resumes from).

A sweep's task's MLflow run is named `<sweep>_<task>` (the task's name here) and tagged with its task index and
point. The run created at submit is ended by ddpctl with the run's end (`close_run`: FINISHED, FAILED, or KILLED
for a cancelled task, one that never started included) unless the script ended it itself.

The edges are `prepare` (writes tracking.json, creates the MLflow run), `withdraw` (deletes that run when the
submit failed), `close_run` (ends it) and `read` (the launcher's read of tracking.json, never through a symlink).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.errors import DdpctlError
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, load_spec
from ddpctl.spec.sweep import Point

TENSORBOARD_DIR = "DDPCTL_TENSORBOARD_DIR"
MLFLOW_URI = "MLFLOW_TRACKING_URI"
# MLflow 3 refuses its file store unless this is true (the store is in maintenance mode, not removed). The file
# store is the default here because it is the one store mlflow-skinny can open: `sqlite:` needs SQLAlchemy and
# Alembic, which only the full mlflow package brings. ddpctl sets it for a file store unless the user set it.
FILE_STORE_GATE = "MLFLOW_ALLOW_FILE_STORE"
MLFLOW_STATUS = {"COMPLETED": "FINISHED", "CANCELLED": "KILLED"}  # a run's end state; any other end: FAILED
MAX_TAG = 500  # characters of a point's value in a tag (MLflow allows 5000; a point is shown, not stored)
MLFLOW_INSTALL = "pip install mlflow-skinny (or mlflow)"


class TrackingError(DdpctlError):
    """A tracker's run could not be created at submit: nothing is submitted."""

    exit_code = 1


def mlflow_uri(spec: JobSpec, environ: Mapping[str, str], cwd: Path) -> str:
    """The MLflow store the run goes to: MLFLOW_TRACKING_URI from the spec's env, else from the submitting
    environment, else a file store `<run_dir>/mlruns` (the one kind mlflow-skinny opens, see FILE_STORE_GATE)
    rather than in whatever directory each process starts in. A plain path means a file store and is made
    absolute here, so that every node finds the store the run was created in (pure)."""
    value = dict(spec.env).get(MLFLOW_URI) or environ.get(MLFLOW_URI)
    if not value:
        return (cwd / spec.run_dir / "mlruns").absolute().as_uri()
    if "://" in value or value.startswith("file:"):
        return value
    return (cwd / value).absolute().as_uri()


def store_env(uri: str, given: Mapping[str, str]) -> list[tuple[str, str]]:
    """What the MLflow client needs to open the store `uri` that `given` (the spec's and the environment's
    variables) does not already say: for a file store, FILE_STORE_GATE=true (pure)."""
    return [(FILE_STORE_GATE, "true")] if uri.startswith("file:") and FILE_STORE_GATE not in given else []


def rank_env(record: Mapping[str, Any], layout: RunLayout, given: Mapping[str, str]) -> list[tuple[str, str]]:
    """The variables the ranks get for the trackers in `record` (tracking.json); `given` is what the spec and
    the job already set, which a default here never overrides (pure)."""
    env: list[tuple[str, str]] = []
    wandb = record.get("wandb")
    if isinstance(wandb, Mapping) and isinstance(wandb.get("id"), str):
        env += [("WANDB_RUN_ID", wandb["id"]), ("WANDB_RESUME", "allow")]
        if isinstance(record.get("group"), str):
            env.append(("WANDB_RUN_GROUP", record["group"]))
        if "WANDB_DIR" not in given:
            env.append(("WANDB_DIR", str(layout.root)))  # wandb writes its wandb/ directory there
    mlflow = record.get("mlflow")
    if isinstance(mlflow, Mapping) and isinstance(mlflow.get("run_id"), str) and isinstance(mlflow.get("uri"), str):
        env += [("MLFLOW_RUN_ID", mlflow["run_id"]), (MLFLOW_URI, mlflow["uri"]), *store_env(mlflow["uri"], given)]
    if record.get("tensorboard"):
        env.append((TENSORBOARD_DIR, str(layout.tensorboard_dir)))
    return env


def placeholder(spec: JobSpec) -> dict[str, Any]:
    """What a dry run shows for the identities `prepare` fixes only at submit (pure)."""
    later = "<fixed at submit>"
    record: dict[str, Any] = {"group": None}
    if "wandb" in spec.tracking:
        record["wandb"] = {"id": later}
    if "mlflow" in spec.tracking:
        record["mlflow"] = {"run_id": later, "uri": later}
    if "tensorboard" in spec.tracking:
        record["tensorboard"] = True
    return record


def prepare(
    spec: JobSpec,
    layout: RunLayout,
    environ: Mapping[str, str],
    cwd: Path,
    group: str | None = None,
    *,
    point: Point | None = None,
) -> dict[str, Any]:
    """Fix the run's tracker identities in `layout`'s tracking.json (nothing without `tracking` in the spec).
    Creates the MLflow run (`point`: a sweep's task, named and tagged by it); `withdraw` deletes it if the
    submit then fails."""
    if not spec.tracking:
        return {}
    record: dict[str, Any] = {"group": group}
    if "wandb" in spec.tracking:
        record["wandb"] = {"id": uuid.uuid4().hex[:16]}  # W&B ids: [a-z0-9], unique in the project
    if "tensorboard" in spec.tracking:
        record["tensorboard"] = True
        layout.tensorboard_dir.mkdir(exist_ok=True)
    if "mlflow" in spec.tracking:
        record["mlflow"] = create_mlflow_run(spec, mlflow_uri(spec, environ, cwd), environ, point)
    try:
        safeio.write_json_atomic(layout.tracking_file, record)
    except BaseException:
        withdraw(record)
        raise
    return record


def run_names(spec: JobSpec, point: Point | None) -> tuple[str, dict[str, str]]:
    """The MLflow run's name and tags: the job's name, or a sweep task's `<sweep>_<task>` with its task index,
    its point and one `point.<key>` tag per value, so the runs of a sweep can be told apart and filtered (pure)."""
    if point is None:
        return spec.name, {"ddpctl.job": spec.name}
    name = f"{spec.name}_{point.index}"
    tags = {"ddpctl.job": name, "ddpctl.sweep": spec.name, "ddpctl.task": str(point.index)}
    tags["ddpctl.point"] = " ".join(point.overrides)[:MAX_TAG]
    tags.update({f"point.{key}": value[:MAX_TAG] for key, value in point.pairs})
    return name, tags


def create_mlflow_run(
    spec: JobSpec, uri: str, environ: Mapping[str, str], point: Point | None = None
) -> dict[str, str]:
    """Create the run in the experiment MLFLOW_EXPERIMENT_NAME names (default: the job's name)."""
    try:
        from mlflow.tracking import MlflowClient  # here: only a spec that tracks with MLflow pays its import
    except ImportError:
        raise TrackingError(
            f"{spec.source}: tracking: mlflow: the mlflow package is not installed where ddpctl submits; "
            f"{MLFLOW_INSTALL}, or drop mlflow from tracking"
        ) from None
    experiment = dict(spec.env).get("MLFLOW_EXPERIMENT_NAME") or environ.get("MLFLOW_EXPERIMENT_NAME") or spec.name
    try:
        with _mlflow_environ(uri, dict(spec.env)):
            client = MlflowClient(tracking_uri=uri)
            found = client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found else _create_experiment(client, experiment)
            name, tags = run_names(spec, point)
            run = client.create_run(experiment_id, run_name=name, tags=tags)
    except Exception as err:  # a store that refuses or cannot be reached: one line, nothing submitted
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise TrackingError(f"{spec.source}: tracking: mlflow: cannot create the run in {uri}: {first}") from None
    return {"run_id": run.info.run_id, "uri": uri, "experiment_id": experiment_id}


@contextmanager
def _mlflow_environ(uri: str, spec_env: Mapping[str, str]) -> Iterator[None]:
    """The spec's MLFLOW_* variables (store options, credentials) in this process while it opens the store, as the
    ranks will have them, with what the store needs (store_env); what was there before is restored."""
    ours = {name: value for name, value in spec_env.items() if name.startswith("MLFLOW_")}
    ours.update(store_env(uri, {**os.environ, **ours}))
    before = {name: os.environ.get(name) for name in ours}
    os.environ.update(ours)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _create_experiment(client: Any, name: str) -> str:
    try:
        return str(client.create_experiment(name))
    except Exception:  # another submit created it in between: use theirs
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)


def withdraw(record: Mapping[str, Any]) -> None:
    """Delete the MLflow run `prepare` created for a submit that then failed (best effort: the store may be
    gone; the run is then left, empty, in the state MLflow calls RUNNING)."""
    mlflow = record.get("mlflow")
    if not isinstance(mlflow, Mapping):
        return
    try:
        from mlflow.tracking import MlflowClient

        with _mlflow_environ(str(mlflow["uri"]), {}):
            MlflowClient(tracking_uri=mlflow["uri"]).delete_run(mlflow["run_id"])
    except Exception:  # best effort, see above
        return


def close_run(layout: RunLayout, state: str) -> str | None:
    """End the MLflow run of the run dir `layout` (its tracking.json) as the run ended (`state`: COMPLETED,
    CANCELLED, FAILED, ...) if it is still RUNNING: a script's own `mlflow.end_run()` stands. Best effort, as
    the store may be gone: a line saying why it was not ended, else None."""
    mlflow = read(layout).get("mlflow")
    if not isinstance(mlflow, Mapping) or not all(isinstance(mlflow.get(k), str) for k in ("run_id", "uri")):
        return None
    try:
        from mlflow.tracking import MlflowClient

        spec_env = dict(load_spec(layout.spec_file, check_paths=False).env) if layout.spec_file.exists() else {}
        with _mlflow_environ(mlflow["uri"], spec_env):
            client = MlflowClient(tracking_uri=mlflow["uri"])
            if client.get_run(mlflow["run_id"]).info.status == "RUNNING":
                client.set_terminated(mlflow["run_id"], MLFLOW_STATUS.get(state, "FAILED"))
    except Exception as err:  # best effort, see above
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        return f"tracking: mlflow: run {mlflow['run_id'][:40]} in {mlflow['uri'][:200]} not ended: {first}"
    return None


def read(layout: RunLayout) -> dict[str, Any]:
    """The run's tracking.json (empty when the run tracks nothing or the file is not a plain file)."""
    return safeio.read_json(layout.tracking_file) or {}
