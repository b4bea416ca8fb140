"""Loading a job spec: YAML + `--set` overrides → validated `JobSpec` (the dataclasses live in `ddpctl.spec.model`).

Paths (`script`, `run_dir`, `checkpoint.dir`, a `template` path, a `python` path containing "/", an image file;
`ddpctl.spec.paths` says which values are paths) come back absolute from `load_spec`: a relative one written in
the file starts at the file's directory, one given in a `--set` at the current directory; `~` is expanded. A
mapping has no file: `spec_from_mapping` keeps its values as written, and `resolve_paths` makes them absolute
against the current directory at submit. `ddpctl submit` stores the absolute paths in job.yaml.

Loading (`load_spec`, `spec_from_mapping`) validates every key; each failure is one `SpecError` line naming
the file and line (or the `--set`), the dotted key, the bad value and what is allowed. Type rules are in
`ddpctl.spec.fields`, the schema in `ddpctl.spec.schema`. Decisions worth knowing:
- `null` for a section (`nccl:`), a list (`args:`) or a mapping (`env:`) means "the defaults"/empty;
  `nproc_per_node` absent or null means gpus_per_node if > 0 else 1; it may not exceed gpus_per_node when > 0.
- `args`, env values and sbatch values may contain anything but NUL (sbatch values: no newlines either); the
  renderer quotes them. `setup` lines are the user's own shell, run as written (a block string is split
  into lines).
- sbatch `false` values are dropped at load; options ddpctl sets itself (nodes, time, signal, output, ...) are
  refused with the spec key to use instead.
- `time` 0 is refused (Slurm reads it as "no limit": write UNLIMITED); with requeue enabled, `requeue.lead_s`
  must be shorter than the time limit.
- `requeue.signal` is one of USR1, USR2, URG, ALRM, with or without "SIG", any case; stored as e.g. "USR2".
- `name` must not be only dots: it is a directory under run_dir.
- With `check_paths`, the script must be an existing file and the template a shipped name or an existing
  .j2 file, both looked for where they resolve. Without it (e.g. reading a run dir's job.yaml on a node)
  neither is looked at.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ddpctl.spec.crossfields import check_files, check_spec
from ddpctl.spec.model import SECTIONS, JobSpec
from ddpctl.spec.overrides import apply_override
from ddpctl.spec.paths import resolve
from ddpctl.spec.schema import validate
from ddpctl.spec.yamldoc import At, Doc, Key, read_doc


def load_spec(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    check_paths: bool = True,
    nofollow: bool = False,
    cwd: str | Path | None = None,
) -> JobSpec:
    """Read a YAML spec, apply `--set key.sub=value` overrides in order, validate; `source` is `path`.
    Paths come back absolute: written in the file, from the file's directory; from an override, from `cwd`
    (default: the current directory). `nofollow`: a run dir's job.yaml, never read through a symlink."""
    doc = read_doc(path, nofollow=nofollow)
    for override in overrides:
        apply_override(doc, override)
    return build_from_doc(doc, path, check_paths=check_paths, cwd=cwd)


def build_from_doc(doc: Doc, path: str | Path, *, check_paths: bool = True, cwd: str | Path | None = None) -> JobSpec:
    """The spec of a Doc read from the file `path` (overrides applied), paths resolved as `load_spec` does."""
    if "sweep" in doc.data:  # ddpctl.spec.sweepload takes the block out before it builds each point's spec
        raise At(doc, ("sweep",)).error("a sweep: block is read by `ddpctl sweep SPEC`; this command runs one job")
    here = _directory(cwd)
    folder = Path(path).parent

    def base(key: Key) -> Path:
        # Only asked for a relative value: a job.yaml of absolute paths never needs the current directory.
        return here() if doc.overridden(key) else (folder if folder.is_absolute() else here() / folder)

    return _build(doc, check_paths=check_paths, base=base, keep_written=False)


def spec_from_mapping(
    data: Mapping[str, Any], source: str = "<spec>", *, check_paths: bool = True, overrides: Sequence[str] = ()
) -> JobSpec:
    """Validate an already-parsed mapping, `--set` overrides applied first (errors name `source`, no lines)."""
    doc = Doc(source, {})
    if not isinstance(data, Mapping):
        raise At(doc).fail(data, "a mapping of spec keys (name: ..., script: ...)", typed=True)
    doc.data = dict(data)
    for override in overrides:
        apply_override(doc, override)
    here = _directory(None)
    return _build(doc, check_paths=check_paths, base=lambda _key: here(), keep_written=True)


def _directory(cwd: str | Path | None) -> Callable[[], Path]:
    return (lambda: Path(cwd).absolute()) if cwd is not None else Path.cwd


def _build(doc: Doc, *, check_paths: bool, base: Callable[[Key], Path], keep_written: bool) -> JobSpec:
    """The validated spec; its paths made absolute against `base(key)`, or (`keep_written`) only checked there."""
    kwargs = validate(doc)
    for name, cls in SECTIONS.items():
        kwargs[name] = cls(**kwargs.get(name, {}))
    spec = JobSpec(**kwargs, source=doc.source)
    check_spec(spec, doc)
    resolved = resolve(spec, base) if check_paths or not keep_written else spec
    if check_paths:
        check_files(resolved, At(doc), spec)
    return spec if keep_written else resolved


def spec_to_mapping(spec: JobSpec) -> dict[str, Any]:
    """Every field but `source` as plain YAML data; `spec_from_mapping` of it gives the spec back."""
    data = dataclasses.asdict(spec)
    del data["source"]
    for key in ("args", "setup", "snapshot_exclude", "tracking"):
        data[key] = list(data[key])
    for key in ("sbatch", "env"):
        data[key] = dict(data[key])
    sections = ("container", "notify") if spec.notify.channels else ("container",)
    if not spec.notify.channels:
        del data["notify"]  # a block without a channel is refused on load: none written is the same "off"
    for section in sections:
        data[section] = {
            key: list(value) if isinstance(value, tuple) else value for key, value in data[section].items()
        }
    if data["resume"]["args"] is not None:
        data["resume"]["args"] = list(data["resume"]["args"])
    return data


def resolve_paths(spec: JobSpec, cwd: Path) -> JobSpec:
    """The spec with its relative paths (`ddpctl.spec.paths.path_values`) made absolute against `cwd`: for a
    spec that came from a mapping (a spec file's come back from `load_spec` absolute already)."""
    base = Path(cwd).absolute()
    return resolve(spec, lambda _key: base)
