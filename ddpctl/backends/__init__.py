"""Backends: how a planned job reaches compute. All share the run-dir layout, registry and launcher."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from ddpctl.errors import SpecError
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.spec import JobSpec

MODULES = {"sbatch": "ddpctl.backends.sbatch", "local": "ddpctl.backends.local",
           "submitit": "ddpctl.backends.submitit_backend"}
DEFAULT = "sbatch"


class Backend(Protocol):
    name: str

    def check_available(self) -> None:
        """Raise BackendUnavailable with what to do when this backend cannot run here."""

    def submit(self, spec: JobSpec, spec_path: Path) -> JobRecord: ...

    def state(self, record: JobRecord) -> JobState: ...

    def cancel(self, record: JobRecord) -> None: ...

    def preempt(self, record: JobRecord, kind: str) -> None: ...


def get_backend(name: str) -> Backend:
    if name not in MODULES:
        raise SpecError(f"backend: got {name!r}, expected one of {', '.join(sorted(MODULES))}")
    backend: Backend = importlib.import_module(MODULES[name]).BACKEND
    return backend


def current_state(record: JobRecord) -> JobState:
    """A job's state, whatever the backend: the one query `status`, `logs -f` and `--wait` use."""
    return get_backend(record.backend).state(record)
