"""A sweep read from a spec file and the command line, every point validated as its own spec.

The file may hold a `sweep:` block beside the spec's keys (it is taken out before the spec is validated):

    sweep:
      name: lr-seed          # optional: the sweep's name, the spec's `name` for every point (run dirs go under it)
      max_parallel: 2        # optional: at most this many array tasks at once (sbatch --array=...%2)
      grid:                  # optional: every combination, keys in this order, the last one varying fastest
        env.LR: [0.1, 0.01]
        env.SEED: [1, 2, 3]
      zip:                   # optional: lists of one length, taken together, crossed with the grid innermost
        args: [[--warmup, "10"], [--warmup, "20"]]

Keys are dotted spec keys, as after `--set`; values are spec values. The command line's `--grid`/`--zip` add
axes after the file's; its `--name`/`--max-parallel` replace the block's. Each point is the spec with `--set`
applied, then the point's values, validated exactly like `--set`; the first bad point is one SpecError line
naming the point (index and values), the key and what is allowed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ddpctl.errors import SpecError
from ddpctl.spec.load import build_from_doc
from ddpctl.spec.model import JobSpec
from ddpctl.spec.overrides import apply_override, check_override_key
from ddpctl.spec.schema import unknown_key
from ddpctl.spec.sweep import Axis, Point, SweepAxes, check_axes, check_values, expand, parse_axis
from ddpctl.spec.yamldoc import At, Doc, one_line, read_doc

BLOCK = "sweep"
_BLOCK_KEYS = ("name", "max_parallel", "grid", "zip")


@dataclass(frozen=True)
class Sweep:
    """A checked sweep: the spec (with `--set` and the sweep's name), the axes, and each point with its spec."""

    spec: JobSpec
    axes: SweepAxes
    points: tuple[tuple[Point, JobSpec], ...]


def load_sweep(
    path: str | Path,
    overrides: Sequence[str] = (),
    *,
    grid: Sequence[str] = (),
    zipped: Sequence[str] = (),
    max_parallel: int | None = None,
    name: str | None = None,
    cwd: str | Path | None = None,
    doc: Doc | None = None,
) -> Sweep:
    """Read the spec file and its `sweep:` block, add the command line's axes, check the sweep's bounds and
    keys, then build and validate every point's spec (nothing is expanded before its size is known). `doc`: the
    file's document already read (a remote cluster's: the laptop's text, its defaults under it); `path` names it."""
    doc = read_doc(path) if doc is None else doc
    block = take_block(doc)
    axes = SweepAxes(
        grid=(*block.grid, *(parse_axis("--grid", word) for word in grid)),
        zip=(*block.zip, *(parse_axis("--zip", word) for word in zipped)),
        max_parallel=max_parallel if max_parallel is not None else block.max_parallel,
        name=name if name is not None else block.name,
        origins=block.origins,  # the file's axes come first: the command line's keep --grid/--zip
    )
    settings = [*overrides, *([f"name={json.dumps(axes.name)}"] if axes.name is not None else [])]
    check_axes(axes, [word.partition("=")[0].strip() for word in settings])
    for key, where in axes.named_keys():
        check_override_key(Doc(f"{where} {key}", {}), tuple(key.split(".")))
    for override in overrides:
        apply_override(doc, override)
    if axes.name is not None:
        apply_override(doc, settings[-1], flag="--name" if name is not None else f"{doc.source}: sweep.name")
    spec = build_from_doc(copy.deepcopy(doc), path, cwd=cwd)
    points = tuple((point, point_spec(doc, path, point, cwd)) for point in expand(axes))
    return Sweep(spec, axes, points)


def point_spec(doc: Doc, path: str | Path, point: Point, cwd: str | Path | None) -> JobSpec:
    """One point's spec: the overrides applied to a copy of the (already overridden) document, validated."""
    label = point.label()
    mine = copy.deepcopy(doc)
    try:
        for override in point.overrides:
            apply_override(mine, override, flag=label)
        spec = build_from_doc(mine, path, cwd=cwd)
    except SpecError as err:
        text = str(err)
        raise SpecError(text if text.startswith(label) else f"{label}: {text}") from None
    return replace(spec, source=f"{spec.source} ({label})")


def take_block(doc: Doc) -> SweepAxes:
    """The file's `sweep:` block, removed from the document (the spec's schema knows no such key), checked."""
    if BLOCK not in doc.data:
        return SweepAxes()
    raw = doc.data.pop(BLOCK)
    at = At(doc, (BLOCK,))
    if not isinstance(raw, dict):
        raise at.fail(raw, "a mapping with keys " + ", ".join(_BLOCK_KEYS), typed=True)
    for key in raw:
        if key not in _BLOCK_KEYS:
            raise unknown_key(at.child(key), list(_BLOCK_KEYS))
    name, parallel = raw.get("name"), raw.get("max_parallel")
    if name is not None and not isinstance(name, str):
        raise at.child("name").fail(name, "a string (the sweep's name)", typed=True)
    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise at.child("max_parallel").fail(parallel, "an integer >= 1", typed=True)
    grid, zipped = _axes(at.child("grid"), raw.get("grid")), _axes(at.child("zip"), raw.get("zip"))
    origins = [f"{doc.source}: sweep.grid"] * len(grid) + [f"{doc.source}: sweep.zip"] * len(zipped)
    return SweepAxes(grid=grid, zip=zipped, max_parallel=parallel, name=name, origins=tuple(origins))


def _axes(at: At, raw: Any) -> tuple[Axis, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise at.fail(raw, "a mapping of dotted spec keys to lists of values", typed=True)
    axes = []
    for key, values in raw.items():
        where = at.child(key)
        if not isinstance(values, list) or not values:
            raise where.fail(values, "a non-empty list of values", typed=True)
        texts = [_yaml_text(At(at.doc, (*where.path, str(i))), value) for i, value in enumerate(values)]
        axes.append(
            (
                ".".join(part.strip() for part in key.split(".")),
                check_values(f"{one_line(at.doc.where(where.path))}: {where.key}", texts),
            )
        )
    return tuple(axes)


def _yaml_text(at: At, value: Any) -> str:
    """A value from the file as `--set` text that YAML reads back the same: a plain scalar as written (`1:30:00`
    stays a time, not YAML 1.1's 5400), anything else as JSON."""
    raw = at.raw()
    if raw is not None:
        return raw
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise at.fail(value, "a plain spec value (string, number, boolean, list or mapping)") from None
