"""Create a run directory without ever leaving a half-written one behind, and read its spec back.

Files are written to a hidden staging directory next to the final one and renamed into place once the job id
is known; on any failure the staging directory is removed. The run's job.yaml never changes after that, so
`run_spec` parses and validates it once per process, however many parts of the process ask.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from ddpctl import safeio
from ddpctl.errors import DdpctlError, SpecError
from ddpctl.run import tracking
from ddpctl.run.layout import STAGING, RunLayout, batch_output
from ddpctl.snapshot import take
from ddpctl.spec import JobSpec, load_spec, spec_to_mapping


@contextmanager
def staging(spec: JobSpec, script_text: str | None) -> Iterator[RunLayout]:
    base = spec.run_base
    stage = RunLayout(base / f"{STAGING}{uuid.uuid4().hex[:12]}")
    try:
        stage.root.mkdir(parents=True)
    except OSError as err:  # read-only, a file in the way, no space: the user's run_dir, one line
        raise SpecError(
            f"{spec.source}: run_dir: cannot create a run directory under {base}: {err.strerror or err}"
        ) from err
    trackers: dict[str, object] = {}
    try:
        stage.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec), sort_keys=False))
        take(spec, stage.snapshot_file, stage.code_dir)  # the code every attempt runs, before the job exists
        if script_text is not None:
            stage.script_file.write_text(script_text)  # 0o666 minus the umask: sbatch reads it, no exec bit
        trackers = tracking.prepare(spec, stage, os.environ, Path.cwd())  # last: it may create an MLflow run
        yield stage
    finally:
        if stage.root.exists():  # not committed: the submit failed
            tracking.withdraw(trackers)
            shutil.rmtree(stage.root, ignore_errors=True)


class RunDirTaken(DdpctlError, FileExistsError):
    """The job's run dir name is taken: another registry (another DDPCTL_HOME) shares this run_dir."""

    exit_code = 1


def commit(stage: RunLayout, spec: JobSpec, job_id: str) -> RunLayout:
    """Rename the staging dir to the job id, claiming that name atomically (mkdir), never into a run dir of
    someone else's. `RunDirTaken` (also a FileExistsError, an OSError) names the run dir that is in the way."""
    final = RunLayout(claim(spec.run_base / job_id))
    try:
        stage.root.rename(final.root)  # onto the empty directory just made: ours, replaced atomically
    except OSError:
        final.root.rmdir()
        raise
    return final


def claim(path: Path) -> Path:
    """Claim a run dir's name (a job's, a sweep's, a sweep task's) by making it empty, atomically (mkdir): the
    caller renames its staged directory onto it. `RunDirTaken` names it when another registry or tool has it."""
    try:
        path.mkdir()
    except FileExistsError:
        raise RunDirTaken(
            f"run dir {path} already exists: another registry (DDPCTL_HOME) or tool uses the run_dir "
            f"{path.parent.parent} too; job ids there must be unique"
        ) from None
    return path


def link_batch_output(layout: RunLayout, spec: JobSpec, job_id: str) -> None:
    """The run dir's slurm.out is the file Slurm writes (`sbatch_output`): one inode under two names, whether
    the job opened it before this (O_APPEND|O_CREAT keeps what it wrote) or opens it later (it appends)."""
    target = batch_output(spec.run_base, job_id)
    safeio.touch(target)
    os.link(target, layout.batch_log, follow_symlinks=False)


# How long node-side commands wait for a run dir that `ddpctl submit` has not renamed to the job id yet.
RUN_DIR_WAIT_S = 60.0


def wait_for_run_dir(layout: RunLayout, timeout_s: float = RUN_DIR_WAIT_S, poll_s: float = 0.1) -> bool:
    """Whether the run dir is committed (its job.yaml exists), waiting up to `timeout_s` for it.

    The sbatch backend does not hold the job, so it may start before submit has renamed the staging dir to the
    job id. The default template waits in the batch shell; this covers a user's own template, whose first
    `ddpctl internal batch-start` must not create <run_base>/<job id>/ itself (submit's rename would then fail).
    """
    deadline = time.monotonic() + timeout_s
    while not layout.spec_file.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


_RUN_SPECS: dict[Path, JobSpec] = {}


def run_spec(layout: RunLayout) -> JobSpec:
    """The run's job.yaml as a checked spec (paths are not checked: they were at submit time)."""
    key = layout.spec_file.absolute()
    spec = _RUN_SPECS.get(key)
    if spec is None:
        spec = _RUN_SPECS[key] = load_spec(layout.spec_file, check_paths=False, nofollow=True)
    return spec
