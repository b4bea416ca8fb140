"""Create a run directory without ever leaving a half-written one behind.

Files are written to a hidden staging directory next to the final one and renamed into place once the job id
is known; on any failure the staging directory is removed.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import yaml

from ddpctl.run.layout import RunLayout
from ddpctl.snapshot import take
from ddpctl.spec import JobSpec, spec_to_mapping


@contextmanager
def staging(spec: JobSpec, script_text: str | None) -> Iterator[RunLayout]:
    base = spec.run_base
    stage = RunLayout(base / f".staging-{uuid.uuid4().hex[:12]}")
    stage.root.mkdir(parents=True)
    try:
        stage.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec), sort_keys=False))
        take(spec, stage.snapshot_file)  # the code every attempt runs, pinned before the job exists
        if script_text is not None:
            stage.script_file.write_text(script_text)
            stage.script_file.chmod(0o755)
        yield stage
    finally:
        if stage.root.exists():
            shutil.rmtree(stage.root, ignore_errors=True)


def commit(stage: RunLayout, spec: JobSpec, job_id: str) -> RunLayout:
    final = RunLayout(spec.run_base / job_id)
    stage.root.rename(final.root)
    return final
