"""Reading what the example trainer's trackers wrote (jobs/example/track.py), with the libraries themselves:
MLflow's client, TensorBoard's event reader, and W&B's offline run files (a LevelDB-style log of protobuf
records, read here with W&B's own protobuf classes)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

WANDB_BLOCK = 32768  # the .wandb file is written in blocks of this size, each record chunk with a 7-byte header
FULL, LAST = 1, 4
FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"


def tracker_env(store: Path) -> dict[str, str]:
    """The spec env of a tracked test job: W&B offline, MLflow in a file store under the test's tmp dir."""
    return {"WANDB_MODE": "offline", "MLFLOW_TRACKING_URI": store.as_uri(), FILE_STORE: "true"}


def mlflow_steps(run_dir: Path) -> tuple[int, str, list[int]]:
    """(runs in the job's experiment, the run's status, the steps of its `loss` metric)."""
    from mlflow.tracking import MlflowClient

    record = json.loads((run_dir / "tracking.json").read_text())["mlflow"]
    before = os.environ.get(FILE_STORE)
    os.environ[FILE_STORE] = "true"  # MLflow's client reads it from here; restored below for the next test
    try:
        client = MlflowClient(tracking_uri=record["uri"])
        runs = client.search_runs([record["experiment_id"]])
        status = client.get_run(record["run_id"]).info.status
        return len(runs), status, [m.step for m in client.get_metric_history(record["run_id"], "loss")]
    finally:
        if before is None:
            del os.environ[FILE_STORE]
        else:
            os.environ[FILE_STORE] = before


def tensorboard_steps(run_dir: Path) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()  # what TensorBoard shows: events past a later file's purge_step are dropped
    return [event.step for event in events.Scalars("loss")]


def wandb_runs(run_dir: Path) -> list[tuple[str, list[int]]]:
    """Each offline run directory W&B wrote (one per attempt), oldest first: (its run id, its history steps)."""
    found = []
    for directory in sorted((run_dir / "wandb").glob("offline-run-*")):
        (log,) = directory.glob("*.wandb")
        found.append(_wandb_run(log.read_bytes()))
    return found


def _wandb_run(data: bytes) -> tuple[str, list[int]]:
    from wandb.proto import wandb_internal_pb2

    run_id, steps = "", []
    for raw in _wandb_records(data):
        record: Any = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_id = record.run.run_id
        elif kind == "history":
            steps += [int(i.value_json) for i in record.history.item if "_step" in (i.key, *i.nested_key)]
    return run_id, steps


def _wandb_records(data: bytes) -> list[bytes]:
    ident, _magic, _version = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B", ident
    pos, records, pending = 7, [], b""
    while pos + 7 <= len(data):
        left = WANDB_BLOCK - pos % WANDB_BLOCK
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if left < 7 or (length == 0 and kind == 0):  # the block's zero-filled tail
            pos += left
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (FULL, LAST):
            records.append(pending)
            pending = b""
    return records
