"""Specs that load: defaults, values as written, overrides, the job.yaml round trip, path resolution, Slurm times."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from ddpctl.spec import (
    CheckpointSettings,
    HealthSettings,
    JobSpec,
    NcclSettings,
    RequeuePolicy,
    load_spec,
    resolve_paths,
    spec_from_mapping,
    spec_to_mapping,
    time_to_seconds,
)
from ddpctl.spec.schema import SECTIONS, TOP

HEAD = "name: demo\nscript: train.py\n"

FULL = """\
name: big-run.v2
script: train.py
args: [--epochs, 10, --lr, 0.5, --flag, true]
nodes: 4
gpus_per_node: 8
cpus_per_task: 12
mem: 4000
time: 1:30:00
partition: gpu,gpu-long
account: proj_1
qos: high
sbatch: {exclusive: true, begin: false, nice: 10, time-min: '10:00', constraint: a100}
setup: ["module load cuda", "source .venv/bin/activate"]
env: {FOO: on, N: 1:30, OCT: 010, EMPTY: ''}
nccl: {socket_ifname: '^docker,lo', ib_disable: yes, debug: info, timeout_s: 600, async_error_handling: false}
requeue: {enabled: true, signal: sigusr1, lead_s: 300, max_preemptions: 2, max_timeouts: 1, max_failures: 4}
checkpoint: {dir: ckpt, keep: 5}
run_dir: out
template: my.sbatch.j2
backend: local
max_restarts: 2
rdzv: c10d
python: .venv/bin/python
"""


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "my.sbatch.j2").write_text("#!/bin/bash\n")
    return tmp_path


def load(text: str, overrides: tuple[str, ...] = ()) -> JobSpec:
    Path("x.yaml").write_text(text)
    return load_spec("x.yaml", overrides)


def test_minimal_spec_takes_the_dataclass_defaults(workdir: Path) -> None:
    expected = JobSpec(name="demo", script=str(workdir / "train.py"), run_dir=str(workdir / "runs"), source="x.yaml")
    assert load(HEAD) == expected


def test_full_spec_keeps_values_as_written(workdir: Path) -> None:
    spec = load(FULL)
    assert spec.args == ("--epochs", "10", "--lr", "0.5", "--flag", "true")
    assert (spec.mem, spec.time, spec.partition) == ("4000", "1:30:00", "gpu,gpu-long")
    assert spec.sbatch == (("exclusive", True), ("nice", 10), ("time-min", "10:00"), ("constraint", "a100"))
    assert spec.env == (("FOO", "on"), ("N", "1:30"), ("OCT", "010"), ("EMPTY", ""))
    assert spec.nccl == NcclSettings("^docker,lo", True, "INFO", 600, False)
    assert spec.requeue == RequeuePolicy(True, "USR1", 300, 2, 1, 4)
    assert spec.checkpoint == CheckpointSettings(str(workdir / "ckpt"), 5)  # paths: absolute (below)
    assert (spec.nproc_per_node, spec.world_size, spec.source) == (8, 32, "x.yaml")


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        ("gpus_per_node: 4\n", "nproc_per_node", 4),
        ("gpus_per_node: 0\n", "nproc_per_node", 1),
        ("gpus_per_node: 4\nnproc_per_node: 2\n", "nproc_per_node", 2),
        ("gpus_per_node: 4\nnproc_per_node:\n", "nproc_per_node", 4),
        ("nproc_per_node: 3\n", "nproc_per_node", 3),
        ("time: UNLIMITED\n", "time", "UNLIMITED"),
        ("time: 2-12\n", "time", "2-12"),
        ("time: 45\n", "time", "45"),
        ("nccl:\nenv:\nargs:\nsbatch:\nsetup:\n", "nccl", NcclSettings()),
        ('setup: |\n  module load a\n  echo "$X" | tr a b\n', "setup", ("module load a", 'echo "$X" | tr a b')),
        ("args: ['--x=$(rm -rf /)', 'a b', \"it's\"]\n", "args", ("--x=$(rm -rf /)", "a b", "it's")),
        ("env:\n  MSG: 'two\n\n    lines'\n", "env", (("MSG", "two\nlines"),)),
        ("env:\n  <<: {A: '1', B: '2'}\n  B: '3'\n", "env", (("A", "1"), ("B", "3"))),
        ("requeue: {signal: USR2}\n", "requeue", RequeuePolicy(signal="USR2")),
        ("requeue: {signal: SIGurg}\n", "requeue", RequeuePolicy(signal="URG")),
        ("requeue: {enabled: false, lead_s: 600}\ntime: 5\n", "requeue", RequeuePolicy(False, lead_s=600)),
        ("sbatch: {exclusive: false}\n", "sbatch", ()),
        ("partition: on\n", "partition", "on"),
        ("template: ./my.sbatch.j2\n", "template", "{here}/my.sbatch.j2"),
    ],
)
def test_values(body: str, field: str, expected: Any, workdir: Path) -> None:
    if isinstance(expected, str):
        expected = expected.format(here=workdir)
    assert getattr(load(HEAD + body), field) == expected


@pytest.mark.parametrize(
    ("overrides", "field", "expected"),
    [
        (("nodes=4",), "nodes", 4),
        (("nodes=4", "nodes=2"), "nodes", 2),
        (("time=1:00:00",), "time", "1:00:00"),
        (("partition=",), "partition", None),
        (("args=[--lr, '0.1']",), "args", ("--lr", "0.1")),
        (("nccl.socket_ifname=ib0",), "nccl", NcclSettings(socket_ifname="ib0")),
        (("nccl={debug: WARN}",), "nccl", NcclSettings(debug="WARN")),
        (("requeue.signal=SIGUSR1", "requeue.lead_s=60"), "requeue", RequeuePolicy(signal="USR1", lead_s=60)),
        (("env.X=1:30", "env.Y=a=b"), "env", (("A", "1"), ("X", "1:30"), ("Y", "a=b"))),
        (("sbatch.exclusive=false", "sbatch.mail-type=END"), "sbatch", (("mail-type", "END"),)),
        ((" nodes = 3",), "nodes", 3),
        (("health.node_check_every_min=10",), "health", HealthSettings(node_check_every_min=10.0)),
        (("health.node_check_every_min=null",), "health", HealthSettings()),
        (("name=2024-01-01",), "name", "2024-01-01"),
    ],
)
def test_overrides(overrides: tuple[str, ...], field: str, expected: Any) -> None:
    spec = load(HEAD + "env: {A: '1'}\nsbatch: {exclusive: true}\n", overrides)
    assert getattr(spec, field) == expected


def test_schema_tables_match_the_dataclasses() -> None:
    assert set(TOP) == {f.name for f in dataclasses.fields(JobSpec)} - {"source"}
    for name, table in SECTIONS.items():
        assert list(table) == [f.name for f in dataclasses.fields(getattr(JobSpec(name="x", script="y"), name))]


@pytest.mark.parametrize(
    "text",
    [
        HEAD,
        FULL,
        HEAD + "time: 10:00\nenv: {X: 'yes'}\nsbatch: {x: 1:00}\n",
        HEAD + "resume: {preset: hf-trainer, args: [--from, '{latest}']}\ncheckpoint: {pattern: 'c-{step}/'}\n",
    ],
)
def test_round_trip_through_job_yaml(text: str) -> None:
    spec = load(text)
    data = spec_to_mapping(spec)
    assert "source" not in data
    assert spec_from_mapping(data, "x.yaml") == spec
    Path("job.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_spec("job.yaml") == dataclasses.replace(spec, source="job.yaml")


def test_mapping_is_plain_yaml_data(workdir: Path) -> None:
    data = spec_to_mapping(load(FULL))
    assert type(data["args"]) is list and type(data["setup"]) is list
    assert data["sbatch"] == {"exclusive": True, "nice": 10, "time-min": "10:00", "constraint": "a100"}
    assert data["env"]["N"] == "1:30"
    assert data["nccl"]["debug"] == "INFO"
    assert data["checkpoint"] == {"dir": str(workdir / "ckpt"), "keep": 5, "pattern": None}
    assert yaml.safe_load(yaml.safe_dump(data)) == data


def test_python_values_are_stringified() -> None:
    data = {"name": "x", "script": "t.py", "env": {"A": True, "B": 3}, "args": [1, 2.5, False], "mem": 4000}
    spec = spec_from_mapping(data, check_paths=False)
    assert (spec.env, spec.args, spec.mem) == ((("A", "true"), ("B", "3")), ("1", "2.5", "false"), "4000")


def test_resolve_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/me")
    spec = dataclasses.replace(spec_from_mapping(yaml.safe_load(FULL), check_paths=False), script="~/t.py")
    resolved = resolve_paths(spec, Path("/sub/mit"))
    assert (resolved.script, resolved.run_dir) == ("/home/me/t.py", "/sub/mit/out")
    assert resolved.checkpoint == CheckpointSettings("/sub/mit/ckpt", 5)
    assert (resolved.template, resolved.python) == ("/sub/mit/my.sbatch.j2", "/sub/mit/.venv/bin/python")
    assert resolved.args == spec.args and resolved.name == spec.name


def test_resolve_paths_leaves_names_and_absolute_paths() -> None:
    spec = JobSpec(name="x", script="/abs/t.py", run_dir="/runs", python="python3", template="ddp")
    assert resolve_paths(spec, Path("/cwd")) == spec
    assert resolve_paths(JobSpec(name="x", script="a/../t.py"), Path("/cwd")).script == "/cwd/a/../t.py"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("5", 300),
        ("90", 5400),
        ("5:30", 330),
        ("0:90", 90),
        ("1:02:03", 3723),
        ("2-3", 2 * 86400 + 3 * 3600),
        ("2-3:04", 2 * 86400 + 3 * 3600 + 4 * 60),
        ("2-3:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5),
        ("UNLIMITED", None),
        ("unlimited", None),
        ("INFINITE", None),
    ],
)
def test_time_to_seconds(text: str, seconds: int | None) -> None:
    assert time_to_seconds(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "1:2:3:4", "1-", "-1", "1-2-3", "a", "1.5", " 5", "5 ", "1h", "1-2:3:4:5", "1:", ":1", "\u0663", "+5"]
)
def test_time_to_seconds_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm time"):
        time_to_seconds(text)
