"""The job spec: what the user wrote, checked, as frozen dataclasses.

The flow inside this package: `yamldoc` reads YAML keeping every key's file and line → `load` applies `--set`
overrides → `schema` checks every key against its table of `fields` converters → `model`'s frozen `JobSpec`.
`templates` says where the shipped batch templates live (the schema checks `template:` against it).

Everything the rest of ddpctl needs is re-exported here: `from ddpctl.spec import JobSpec, load_spec`.
"""

from ddpctl.spec.fields import time_to_seconds
from ddpctl.spec.load import load_spec, resolve_paths, spec_from_mapping, spec_to_mapping
from ddpctl.spec.model import (
    CheckpointSettings,
    ContainerSettings,
    HealthSettings,
    JobSpec,
    MfuSettings,
    NcclSettings,
    RequeuePolicy,
    ResumeSettings,
)

__all__ = [
    "CheckpointSettings",
    "ContainerSettings",
    "HealthSettings",
    "JobSpec",
    "MfuSettings",
    "NcclSettings",
    "RequeuePolicy",
    "ResumeSettings",
    "load_spec",
    "resolve_paths",
    "spec_from_mapping",
    "spec_to_mapping",
    "time_to_seconds",
]
