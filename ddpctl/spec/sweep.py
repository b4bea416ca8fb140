"""A sweep's points (pure): `--grid KEY=V1,V2,...`, `--zip KEY=V1,V2,...` and a spec file's `sweep:` block become
the ordered list of points, each a set of `--set` overrides.

Order: the grid keys in the order given (the file's block first, then the command line), the last one varying
fastest, crossed with the zip rows innermost (`--grid a=1,2 --zip b=x,y --zip c=u,v`: a=1 b=x c=u, a=1 b=y c=v,
a=2 b=x c=u, a=2 b=y c=v). Values are YAML text, exactly as a `--set` value (`--grid args=[--lr, '0.1'],[--lr,
'0.2']`: a comma inside brackets, braces or quotes does not split).

Bounded before anything is expanded: at most MAX_POINTS points (Slurm's default MaxArraySize, 1001, allows array
indexes 0-1000), MAX_VALUES values per key, MAX_KEYS keys, MAX_VALUE_CHARS characters per value. A key named
twice (in the grid and the zip, or also in a `--set`, or one key inside another: `env` and `env.LR`) is refused,
and so is an axis over a key the whole sweep shares (SHARED_KEYS: one array job or queue, on one backend and
cluster, under one name and run-dir root): a point's value there would be written to its job.yaml and ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

from ddpctl.errors import SpecError
from ddpctl.spec.yamldoc import one_line, show

MAX_POINTS = 1001
MAX_VALUES = 1001
MAX_KEYS = 16
MAX_VALUE_CHARS = 4096
_OPEN, _CLOSE = "[{", "]}"
SHARED_KEYS = {
    "name": "--name NAME or sweep.name",
    "run_dir": "--set run_dir=DIR",
    "cluster": "--cluster NAME",
    "backend": "--set backend=NAME",
}

Axis = tuple[str, tuple[str, ...]]  # a dotted spec key and its values, each as YAML text


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its index (the array task id) and its overrides in order."""

    index: int
    pairs: tuple[tuple[str, str], ...]

    @property
    def overrides(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.pairs]

    def label(self) -> str:
        """`sweep point 3 (env.LR=0.1, env.SEED=2)`: how every message names the point (each value cut short)."""
        return f"sweep point {self.index} ({', '.join(_cut(one_line(f'{k}={v}')) for k, v in self.pairs)})"


def _cut(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


@dataclass(frozen=True)
class SweepAxes:
    """What was asked for: grid axes, zip axes (all of one length), the array throttle, the sweep's name."""

    grid: tuple[Axis, ...] = ()
    zip: tuple[Axis, ...] = ()
    max_parallel: int | None = None
    name: str | None = None
    origins: tuple[str, ...] = ()  # where each axis (grid, then zip) was given; default --grid/--zip

    def named_keys(self) -> list[tuple[str, str]]:
        """(key, where it was given) of every axis, in order."""
        named = [(key, "--grid") for key, _ in self.grid] + [(key, "--zip") for key, _ in self.zip]
        return [(key, origin) for (key, _), origin in zip(named, self.origins, strict=False)] + named[
            len(self.origins) :
        ]


def split_values(text: str) -> list[str]:
    """`1e-3,3e-4` → ['1e-3', '3e-4']: commas split, except inside [], {} or quotes (a YAML list is one value)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def parse_axis(flag: str, word: str) -> Axis:
    """One `--grid`/`--zip` word, `KEY=V1,V2,...`, checked for shape and bounds (the key against the schema
    later, with the spec)."""
    key, eq, values_text = word.partition("=")
    key = ".".join(part.strip() for part in key.split("."))
    where = f"{flag} {one_line(show(word))}"
    if not eq or not all(key.split(".")):
        raise SpecError(f"{where}: expected KEY=V1,V2,... with a dotted spec key, e.g. {flag} nodes=1,2")
    values = split_values(values_text)
    return key, check_values(where, values)


def check_values(where: str, values: Sequence[str]) -> tuple[str, ...]:
    if len(values) > MAX_VALUES:
        raise SpecError(f"{where}: {len(values)} values, at most {MAX_VALUES} per key")
    for value in values:
        if not value:
            raise SpecError(f"{where}: an empty value, expected V1,V2,... (write an empty string as '')")
        if len(value) > MAX_VALUE_CHARS:
            raise SpecError(f"{where}: a value of {len(value)} characters, at most {MAX_VALUE_CHARS}")
    return tuple(values)


def check_axes(axes: SweepAxes, set_keys: Sequence[str] = ()) -> int:
    """The number of points, after refusing a sweep that is empty, too big, has zip keys of unequal lengths or
    names a key twice (`set_keys`: the `--set` keys, which a point would silently override)."""
    keys = axes.named_keys()
    if not keys:
        raise SpecError("sweep: no --grid or --zip given (and no sweep: block in the spec), expected at least one")
    if len(keys) > MAX_KEYS:
        raise SpecError(f"sweep: {len(keys)} keys, at most {MAX_KEYS}")
    for key, where in keys:
        if (shared := SHARED_KEYS.get(key.split(".")[0])) is not None:
            raise SpecError(
                f"{where} {key}: a key the whole sweep shares, cannot vary per point (one job array or queue, on "
                f"one backend and cluster, one name and run-dir root); set it once ({shared}), or run one sweep "
                "per value"
            )
    _check_unique(keys, set_keys)
    if axes.zip:
        first_key, first = axes.zip[0]
        for key, values in axes.zip[1:]:
            if len(values) != len(first):
                raise SpecError(
                    f"--zip {key}: {len(values)} values, but --zip {first_key} has {len(first)}; "
                    "zipped keys need equally many values"
                )
    count = math.prod(len(values) for _, values in axes.grid) * (len(axes.zip[0][1]) if axes.zip else 1)
    if count > MAX_POINTS:
        raise SpecError(
            f"sweep: {count} points, at most {MAX_POINTS} (Slurm's default MaxArraySize: array indexes 0-"
            f"{MAX_POINTS - 1}); split it into several sweeps"
        )
    if axes.max_parallel is not None and axes.max_parallel < 1:
        raise SpecError(f"--max-parallel: got {axes.max_parallel}, expected an integer >= 1")
    return count


def _check_unique(keys: Sequence[tuple[str, str]], set_keys: Sequence[str]) -> None:
    named = [*keys, *((key, "--set") for key in set_keys)]
    for i, (key, where) in enumerate(named):
        for other, other_where in named[:i]:
            if _overlap(key, other):
                raise SpecError(
                    f"{where} {key}: key also given as {other_where} {other}; each key once per sweep "
                    "(a point's value would replace the other)"
                )


def _overlap(a: str, b: str) -> bool:
    """`env` and `env.LR` overlap (one holds the other), `env.LR` and `env.WD` do not."""
    pa, pb = a.split("."), b.split(".")
    return pa[: len(pb)] == pb or pb[: len(pa)] == pa


def expand(axes: SweepAxes) -> list[Point]:
    """Every point in order (check_axes first: this expands whatever it is given)."""
    grid_keys = [key for key, _ in axes.grid]
    zip_keys = [key for key, _ in axes.zip]
    rows = list(zip(*(values for _, values in axes.zip), strict=True)) if axes.zip else [()]
    points = []
    for index, (*grid_values, row) in enumerate(product(*(values for _, values in axes.grid), rows)):
        pairs = (*zip(grid_keys, grid_values, strict=True), *zip(zip_keys, row, strict=True))
        points.append(Point(index, tuple(pairs)))
    return points


def array_range(count: int, max_parallel: int | None) -> str:
    """sbatch's `--array` value: `0-(n-1)`, with `%N` when at most N tasks may run at once."""
    indexes = "0" if count == 1 else f"0-{count - 1}"
    return indexes if max_parallel is None else f"{indexes}%{max_parallel}"
