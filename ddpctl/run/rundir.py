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

from ddpctl.errors import SpecError
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, spec_to_mapping


@contextmanager
def staging(spec: JobSpec, script_text: str | None) -> Iterator[RunLayout]:
    base = spec.run_base
    stage = RunLayout(base / f".staging-{uuid.uuid4().hex[:12]}")
    try:
        stage.root.mkdir(parents=True)
    except OSError as err:  # read-only, a file in the way, no space: the user's run_dir, one line
        raise SpecError(f"{spec.source}: run_dir: cannot create a run directory under {base}: "
                        f"{err.strerror or err}") from err
    try:
        stage.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec), sort_keys=False))
        if script_text is not None:
            stage.script_file.write_text(script_text)  # 0o666 minus the umask: sbatch reads it, no exec bit
        yield stage
    finally:
        if stage.root.exists():
            shutil.rmtree(stage.root, ignore_errors=True)


def commit(stage: RunLayout, spec: JobSpec, job_id: str) -> RunLayout:
    final = RunLayout(spec.run_base / job_id)
    stage.root.rename(final.root)
    return final
