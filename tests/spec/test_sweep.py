"""Sweep expansion (ddpctl.spec.sweep, .sweepload): point order, bounds, duplicate keys, each point validated as
its own spec with one line naming the point. Literal tables; specs written to tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.spec.sweep import MAX_POINTS, SweepAxes, array_range, check_axes, expand, parse_axis, split_values
from ddpctl.spec.sweepload import load_sweep

SPEC = """\
name: base
script: train.py
nodes: 2
time: "00:10:00"
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1,2,3", ["1", "2", "3"]),
        ("1e-3, 3e-4", ["1e-3", "3e-4"]),
        ("[--lr, '0.1'],[--lr, '0.2']", ["[--lr, '0.1']", "[--lr, '0.2']"]),
        ("{a: 1, b: 2},x", ["{a: 1, b: 2}", "x"]),
        ("'a,b',\"c,d\"", ["'a,b'", '"c,d"']),
        ("solo", ["solo"]),
    ],
)
def test_split_values(text: str, values: list[str]) -> None:
    assert split_values(text) == values


def test_point_order_grid_then_zip_last_fastest() -> None:
    axes = SweepAxes(grid=(("a", ("1", "2")),), zip=(("b", ("x", "y")), ("c", ("u", "v"))))
    assert check_axes(axes) == 4
    assert [(p.index, p.pairs) for p in expand(axes)] == [
        (0, (("a", "1"), ("b", "x"), ("c", "u"))),
        (1, (("a", "1"), ("b", "y"), ("c", "v"))),
        (2, (("a", "2"), ("b", "x"), ("c", "u"))),
        (3, (("a", "2"), ("b", "y"), ("c", "v"))),
    ]


def test_grid_product_order() -> None:
    axes = SweepAxes(grid=(("nodes", ("1", "2")), ("env.SEED", ("7", "8", "9"))))
    assert [p.overrides for p in expand(axes)] == [
        ["nodes=1", "env.SEED=7"],
        ["nodes=1", "env.SEED=8"],
        ["nodes=1", "env.SEED=9"],
        ["nodes=2", "env.SEED=7"],
        ["nodes=2", "env.SEED=8"],
        ["nodes=2", "env.SEED=9"],
    ]


@pytest.mark.parametrize("key", ["run_dir", "name", "cluster", "backend"])
def test_an_axis_over_a_key_the_whole_sweep_shares_is_refused(key: str) -> None:
    """Issue 43 item 9: these were accepted, shown and written to each task's job.yaml, then ignored."""
    with pytest.raises(SpecError) as err:
        check_axes(SweepAxes(grid=(("env.LR", ("1",)),), zip=((key, ("a", "b")),)))
    assert str(err.value).startswith(f"--zip {key}: a key the whole sweep shares, cannot vary per point")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("axes", "set_keys", "message"),
    [
        (SweepAxes(), (), "sweep: no --grid or --zip given"),
        (
            SweepAxes(zip=(("a", ("1", "2")), ("b", ("1", "2", "3")))),
            (),
            "--zip b: 3 values, but --zip a has 2; zipped keys need equally many values",
        ),
        (SweepAxes(grid=(("a", ("1",)),), zip=(("a", ("2",)),)), (), "--zip a: key also given as --grid a"),
        (SweepAxes(grid=(("env.LR", ("1",)),)), ("env",), "--set env: key also given as --grid env.LR"),
        (
            SweepAxes(grid=(("a", tuple(map(str, range(100)))), ("b", tuple(map(str, range(11)))))),
            (),
            "sweep: 1100 points, at most 1001 (Slurm's default MaxArraySize: array indexes 0-1000)",
        ),
        (SweepAxes(grid=(("a", ("1",)),), max_parallel=0), (), "--max-parallel: got 0, expected an integer >= 1"),
    ],
)
def test_check_axes_refuses(axes: SweepAxes, set_keys: tuple[str, ...], message: str) -> None:
    with pytest.raises(SpecError) as err:
        check_axes(axes, set_keys)
    assert str(err.value).startswith(message)


def test_overlapping_but_distinct_keys_pass() -> None:
    assert check_axes(SweepAxes(grid=(("env.LR", ("1",)), ("env.WD", ("2",)))), ["env.SEED", "nodes"]) == 1


def test_cap_exactly_max_points_passes() -> None:
    assert check_axes(SweepAxes(grid=(("a", tuple(map(str, range(MAX_POINTS)))),))) == MAX_POINTS


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("nodes", "--grid 'nodes': expected KEY=V1,V2,..."),
        ("=1,2", "--grid '=1,2': expected KEY=V1,V2,..."),
        ("nodes=1,,2", "--grid 'nodes=1,,2': an empty value"),
        ("nodes=" + ",".join(["1"] * 1002), "values, at most 1001 per key"),
    ],
)
def test_parse_axis_refuses(word: str, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace(".", r"\.").replace("'", "'")):
        parse_axis("--grid", word)


@pytest.mark.parametrize(
    ("count", "parallel", "expected"), [(1, None, "0"), (4, None, "0-3"), (4, 2, "0-3%2"), (1001, 8, "0-1000%8")]
)
def test_array_range(count: int, parallel: int | None, expected: str) -> None:
    assert array_range(count, parallel) == expected


def test_each_point_is_its_spec(spec_file: Path) -> None:
    sweep = load_sweep(spec_file, ["nodes=3"], grid=["env.LR=0.1,0.01"], zipped=["args=[--a],[--b]"])
    assert [(s.env, s.args, s.nodes) for _, s in sweep.points] == [
        ((("LR", "0.1"),), ("--a",), 3),
        ((("LR", "0.1"),), ("--b",), 3),
        ((("LR", "0.01"),), ("--a",), 3),
        ((("LR", "0.01"),), ("--b",), 3),
    ]


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (["nodes=2,0"], "sweep point 1 (nodes=0): nodes: got 0, expected an integer in 1..16384"),
        (["nodse=1,2"], "--grid nodse: nodse: unknown key, did you mean 'nodes'?"),
        (["requeue.lead=1"], "--grid requeue.lead: requeue.lead: unknown key, did you mean 'lead_s'?"),
        (["time=1:00:00,0"], "sweep point 1 (time=0): time: "),
    ],
)
def test_bad_point_is_one_line_naming_it(spec_file: Path, grid: list[str], message: str) -> None:
    with pytest.raises(SpecError) as err:
        load_sweep(spec_file, grid=grid)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_cross_field_failure_names_the_point(spec_file: Path) -> None:
    # gpus_per_node=1 with nproc_per_node=2 is refused by a rule across fields, not by the overridden key alone
    with pytest.raises(SpecError, match=r"^sweep point 1 \(gpus_per_node=1\): "):
        load_sweep(spec_file, ["nproc_per_node=2"], grid=["gpus_per_node=2,1"])


def test_block_in_file(spec_file: Path) -> None:
    spec_file.write_text(
        SPEC
        + "sweep:\n  name: lrs\n  max_parallel: 2\n  grid:\n    env.LR: [0.1, 0.01]\n"
        + "  zip:\n    time: [1:30:00, '2:00:00']\n    args: [[--a], [--b]]\n"
    )
    sweep = load_sweep(spec_file, grid=["env.WD=1"], max_parallel=3)
    assert (sweep.axes.max_parallel, sweep.axes.name, sweep.spec.name) == (3, "lrs", "lrs")
    assert [p.overrides for p, _ in sweep.points] == [
        ["env.LR=0.1", "env.WD=1", "time=1:30:00", 'args=["--a"]'],
        ["env.LR=0.1", "env.WD=1", 'time="2:00:00"', 'args=["--b"]'],
        ["env.LR=0.01", "env.WD=1", "time=1:30:00", 'args=["--a"]'],
        ["env.LR=0.01", "env.WD=1", 'time="2:00:00"', 'args=["--b"]'],
    ]
    assert [s.time for _, s in sweep.points] == ["1:30:00", "2:00:00", "1:30:00", "2:00:00"]  # not YAML's 5400


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("sweep: [1]\n", "job.yaml:5: sweep: got [1] (a list), expected a mapping with keys name, max_parallel"),
        ("sweep:\n  gird: {nodes: [1]}\n", "job.yaml:6: sweep.gird: unknown key, did you mean 'grid'?"),
        ("sweep:\n  grid: {nodes: 2}\n", "job.yaml:6: sweep.grid.nodes: got 2 (an integer), expected a non-empty"),
        ("sweep:\n  grid: {nodes: []}\n", "job.yaml:6: sweep.grid.nodes: got [] (a list), expected a non-empty"),
        ("sweep:\n  max_parallel: 0\n  grid: {nodes: [1]}\n", "job.yaml:6: sweep.max_parallel: got 0"),
        ("sweep:\n  grid: {nodes: [1, 0]}\n", "sweep point 1 (nodes=0): nodes: got 0, expected an integer in 1..16384"),
    ],
)
def test_block_refusals(spec_file: Path, block: str, message: str) -> None:
    spec_file.write_text(SPEC + block)
    with pytest.raises(SpecError) as err:
        load_sweep(spec_file)
    assert message in str(err.value)


def test_name_applies_to_every_point_and_is_validated(spec_file: Path) -> None:
    sweep = load_sweep(spec_file, grid=["nodes=1,2"], name="lr")
    assert {s.name for _, s in sweep.points} == {"lr"}
    with pytest.raises(SpecError, match=r"^--name: name: "):
        load_sweep(spec_file, grid=["nodes=1,2"], name="..")


def test_key_in_file_and_command_line_is_refused_naming_both(spec_file: Path) -> None:
    spec_file.write_text(SPEC + "sweep:\n  grid: {env.LR: [1, 2]}\n")
    with pytest.raises(SpecError) as err:
        load_sweep(spec_file, zipped=["env=[]"])
    assert str(err.value) == (
        f"--zip env: key also given as {spec_file}: sweep.grid env.LR; each key once per sweep"
        " (a point's value would replace the other)"
    )


def test_a_single_job_command_names_the_sweep_command(spec_file: Path) -> None:
    from ddpctl.spec import load_spec

    spec_file.write_text(SPEC + "sweep:\n  grid: {nodes: [1, 2]}\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec_file)
    assert str(err.value) == (
        f"{spec_file}:5: sweep: a sweep: block is read by `ddpctl sweep SPEC`; this command runs one job"
    )
