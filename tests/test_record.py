"""Record gives the frozen dataclasses built at start-up the same __eq__, __hash__ and __repr__ as
`dataclass(frozen=True)` would generate, without compiling them per class at import (start-up time:
benchmarks/README.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ddpctl.plan.render import RenderInputs
from ddpctl.record import Record
from ddpctl.run.layout import RunLayout
from ddpctl.spec.capabilities import BACKENDS, Capabilities
from ddpctl.spec.model import (
    CheckpointSettings,
    ContainerSettings,
    HealthSettings,
    JobSpec,
    NcclSettings,
    RequeuePolicy,
)
from ddpctl.spec.yamldoc import At, Doc

CLASSES = (
    NcclSettings,
    RequeuePolicy,
    CheckpointSettings,
    HealthSettings,
    ContainerSettings,
    JobSpec,
    Capabilities,
    RunLayout,
    RenderInputs,
    At,
)


TWINS: dict[type, Any] = {}  # one twin class per class: instances of two different classes are never equal


def generated(cls: type) -> Any:
    """The same fields in a plain `dataclass(frozen=True)`: the methods Record stands in for, as generated."""
    specs = [
        (f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
        for f in dataclasses.fields(cls)
    ]
    return TWINS.setdefault(cls, dataclasses.make_dataclass(cls.__name__, specs, frozen=True))


def twin(value: Any) -> Any:
    return generated(type(value))(**{f.name: getattr(value, f.name) for f in dataclasses.fields(value)})


DOC = Doc("job.yaml", {"nodes": 2}, lines={("nodes",): 3})

SAMPLES = [
    NcclSettings(),
    NcclSettings(socket_ifname="ib0", debug="INFO"),
    RequeuePolicy(signal="USR1", mode="chain", script_signal="TERM"),
    CheckpointSettings(dir="/ckpt", keep=1),
    HealthSettings(hang_timeout_s=0, straggler_factor=1.5, preflight=True),
    ContainerSettings(runtime="pyxis", image="img:1", mounts=("/a:/b",), env=("HOME",)),
    JobSpec("train", "train.py"),
    JobSpec("train", "train.py", args=("--lr", "0.1"), nodes=4, env=(("A", "1"),), sbatch=(("exclusive", True),)),
    *BACKENDS.values(),
    RunLayout(Path("/runs/train/17")),
    RenderInputs(Path("/runs/train"), "/usr/bin/python3"),
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_the_classes_take_eq_hash_and_repr_from_record(cls: type) -> None:
    # A class declared @dataclass(frozen=True) again would compile its own (and still pass the tests below).
    assert issubclass(cls, Record)
    assert (cls.__eq__, cls.__hash__, cls.__repr__) == (Record.__eq__, Record.__hash__, Record.__repr__)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_each_class_has_its_own_docstring(cls: type) -> None:
    # Without one, `dataclass` writes "Name(field: type, ...)" from inspect.signature at import (start-up time).
    assert "__doc__" in vars(cls) and not cls.__doc__.startswith(f"{cls.__name__}(")  # type: ignore[union-attr]


@pytest.mark.parametrize("value", SAMPLES, ids=repr)
def test_repr_and_hash_are_the_generated_ones(value: Any) -> None:
    assert repr(value) == repr(twin(value))
    assert hash(value) == hash(twin(value))


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (JobSpec("a", "s"), JobSpec("a", "s"), True),
        (JobSpec("a", "s"), JobSpec("a", "s", nodes=2), False),
        (JobSpec("a", "s", nccl=NcclSettings(debug="INFO")), JobSpec("a", "s"), False),
        (NcclSettings(), NcclSettings(), True),
        (CheckpointSettings(), CheckpointSettings(keep=4), False),
        (BACKENDS["sbatch"], BACKENDS["local"], False),
        (RunLayout(Path("/r/1")), RunLayout(Path("/r/1")), True),
        (RunLayout(Path("/r/1")), RunLayout(Path("/r/2")), False),
        (RenderInputs(Path("/r"), "python"), RenderInputs(Path("/r"), "python3"), False),
        (At(DOC, ("nodes",)), At(DOC, ("nodes",)), True),
        (At(DOC, ("nodes",)), At(DOC, ("name",)), False),
    ],
)
def test_equality_is_the_generated_one(left: Any, right: Any, equal: bool) -> None:
    assert (left == right) is equal is (twin(left) == twin(right))
    assert (left != right) is not equal


def test_another_class_with_the_same_values_is_not_equal() -> None:
    # dataclass's __eq__ compares instances of the same class only (NotImplemented otherwise).
    assert CheckpointSettings() != twin(CheckpointSettings())
    assert CheckpointSettings().__eq__(twin(CheckpointSettings())) is NotImplemented


def test_a_record_holding_a_mutable_doc_is_unhashable_as_the_generated_one_is() -> None:
    at = At(DOC, ("nodes",))
    assert repr(at) == repr(twin(at))
    for value in (at, twin(at)):
        with pytest.raises(TypeError, match="unhashable type: 'Doc'"):
            hash(value)


@pytest.mark.parametrize("value", [*SAMPLES, At(DOC, ("nodes",))], ids=repr)
def test_every_class_is_still_frozen(value: Any) -> None:
    name = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, name, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(value, name)


def test_still_frozen_and_replaceable() -> None:
    spec = JobSpec("a", "s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.nodes = 2  # type: ignore[misc]
    assert dataclasses.replace(spec, nodes=2) == JobSpec("a", "s", nodes=2)
    assert {spec, JobSpec("a", "s")} == {spec}
