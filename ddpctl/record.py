"""A base for frozen dataclasses that are built on every command's start (the spec model, the backends'
capabilities, the run layout, the renderer's inputs): `dataclass`'s own __eq__, __hash__ and __repr__, written once
here instead of compiled per class.

`@dataclass(frozen=True)` compiles six methods per class with `exec` when its module is imported (__init__,
__repr__, __eq__, __hash__, __setattr__, __delattr__): about half of a fresh `ddpctl render`'s time in the spec's
own modules went there (benchmarks/README.md). A class declared `@dataclass(frozen=True, eq=False, repr=False)`
on Record has its __init__ and frozenness compiled as before and the other three from here, with the same
results as the generated ones (tests/test_record.py compares them with `dataclass(frozen=True)`'s). Such a class
also carries a docstring: without one, `dataclass` builds it from `inspect.signature` of the class.

Here, below every package (it imports nothing of ddpctl): the run layout and the spec both use it, and importing
it from `ddpctl.spec` would load the whole spec package (and PyYAML) into commands that read no spec.
"""

from __future__ import annotations

import reprlib
from dataclasses import fields


class Record:
    __slots__ = ()

    def _compared(self) -> tuple[object, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if f.compare)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._compared() == other._compared()
        return NotImplemented

    def __hash__(self) -> int:
        hashed = (f for f in fields(self) if (f.compare if f.hash is None else f.hash))  # type: ignore[arg-type]
        return hash(tuple(getattr(self, f.name) for f in hashed))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{self.__class__.__qualname__}({shown})"
