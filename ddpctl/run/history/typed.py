"""A frozen dataclass from an untrusted JSON record: each field checked against its type hint (pure).

Supported hints are the ones events use: int, float, str, bool, None, Literal[...], unions of these,
tuple[X, ...] (from a JSON list) and Mapping[str, Any] (a JSON object). JSON's true is never a number here.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def build_event(cls: type[T], record: Mapping[str, Any]) -> T | None:
    """`cls` from a record's fields; None when a required field is missing or of the wrong type."""
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for field in fields(cls):
        required = field.default is MISSING and field.default_factory is MISSING
        ok, value = fit(hints[field.name], record.get(field.name, MISSING))
        if ok:
            values[field.name] = value
        elif required:
            return None
    return cls(**values)


def fit(hint: Any, value: Any) -> tuple[bool, Any]:
    """Whether `value` (from JSON) is of type `hint`, and the value to store (lists become tuples)."""
    if value is MISSING:
        return False, None
    origin, args = get_origin(hint), get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return next(((True, fitted) for arg in args for ok, fitted in [fit(arg, value)] if ok), (False, None))
    if origin is Literal:
        return value in args, value
    if origin is tuple:
        if not isinstance(value, list):
            return False, None
        items = [fit(args[0], item) for item in value]
        return all(ok for ok, _ in items), tuple(item for _, item in items)
    return fit_scalar(dict if origin is Mapping else hint, value), value


def fit_scalar(hint: Any, value: Any) -> bool:
    if hint is type(None):
        return value is None
    if isinstance(value, bool):  # JSON's true is no number here
        return hint is bool
    if hint is float:
        return isinstance(value, (int, float))
    return isinstance(value, hint)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
