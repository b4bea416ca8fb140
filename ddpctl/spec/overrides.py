"""`--set KEY=VALUE`: which dotted keys the schema's tables accept, and applying one to a parsed Doc."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ddpctl.errors import ArgumentError, SpecError
from ddpctl.spec.schema import FREE_MAPS, SECTIONS, TOP, unknown_key
from ddpctl.spec.yamldoc import At, Doc, Key, one_line, parse_yaml

Overrides = Sequence[str] | Mapping[str, Any]


def as_overrides(given: object) -> list[str]:
    """The API's `overrides=` as `--set` words: `KEY=VALUE` strings as they are, or a mapping (`{"nodes": 4,
    "name": "run-1"}`) whose values are written as JSON, which YAML reads back as the same value and type (a
    string stays a string). A lone string is one override, not its characters (pure)."""
    if isinstance(given, str):
        return [given]
    if isinstance(given, Mapping):
        words = []
        for key, value in given.items():
            if not isinstance(key, str):
                raise ArgumentError(
                    f"overrides: key {key!r} is a {type(key).__name__}; keys are spec keys like 'nodes'"
                )
            try:
                words.append(f"{key}={json.dumps(value, allow_nan=False)}")
            except (TypeError, ValueError) as err:
                raise ArgumentError(f"overrides: {key}: {one_line(repr(value))} is not a spec value ({err})") from None
        return words
    if isinstance(given, Sequence) and all(isinstance(item, str) for item in given):
        return list(given)
    raise ArgumentError(
        f"overrides: got {type(given).__name__}; expected a mapping of spec keys to values or a list of"
        " 'KEY=VALUE' strings"
    )


def apply_override(doc: Doc, override: str, flag: str | None = None) -> None:
    """Apply one `--set key.sub=value`: a known dotted key, the value as YAML (`4`, `[a, b]`, `{x: 1}`).
    `flag`: what errors name as the override's origin (default `--set KEY=VALUE`; a sweep names its point)."""
    flag = flag or f"--set {one_line(override)}"
    key, eq, value_text = override.partition("=")
    path = tuple(part.strip() for part in key.split("."))
    if not eq or not all(path):
        raise SpecError(f"{flag}: expected KEY=VALUE with a dotted spec key, e.g. --set nodes=2")
    check_override_key(Doc(flag, {}), path)
    parent = doc.data
    for depth, part in enumerate(path[:-1], start=1):
        child = parent.get(part)
        if child is None:
            child = parent[part] = {}
        if not isinstance(child, dict):
            raise At(doc, path[:depth]).fail(child, f"a mapping (to apply {flag})", typed=True)
        parent = child
    doc.forget(path)
    doc.origins[path] = flag
    parent[path[-1]] = parse_yaml(value_text, doc, path, override=flag)


def check_override_key(flag_doc: Doc, path: Key) -> None:
    """A --set must name a spec key: a top-level key, a section's key, or a name under env/sbatch."""
    at = At(flag_doc, path[:1])
    if path[0] not in TOP:
        raise unknown_key(at, list(TOP))
    if len(path) == 1 or (path[0] in FREE_MAPS and len(path) == 2):
        return
    if path[0] in SECTIONS and len(path) == 2:
        if path[1] not in SECTIONS[path[0]]:
            raise unknown_key(At(flag_doc, path), list(SECTIONS[path[0]]))
        return
    raise At(flag_doc, path).error(f"unknown key, {path[0]} has no sub-key {'.'.join(path[1:])!r}")


def spec_keys() -> list[str]:
    """Every key `--set` accepts, dotted, from the tables (`env.` and `sbatch.` take the user's own names)."""
    keys = [name for name in TOP if name not in SECTIONS]
    keys += [f"{name}.{key}" for name, table in SECTIONS.items() for key in table]
    return sorted(keys)


def key_choices(key: str) -> tuple[str, ...]:
    """The allowed values of a key that has a fixed set of them (for completion); () for any other."""
    head, _, sub = key.partition(".")
    conv = SECTIONS.get(head, {}).get(sub) if sub else TOP.get(head)
    choices: tuple[str, ...] = getattr(conv, "choices", ())
    return choices
