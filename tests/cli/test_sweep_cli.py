"""`ddpctl sweep` through the real CLI (a subprocess, its own DDPCTL_HOME): the dry run's points and array
script, the one line that says a backend other than sbatch does not run sweeps yet, a bad point's one line;
nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import Cli

SPEC = """\
name: lr
script: train.py
nodes: 2
time: "00:10:00"
run_dir: runs
sweep:
  max_parallel: 2
  grid:
    env.LR: [0.1, 0.01]
"""


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text(SPEC)
    return Cli(tmp_path / "home", cwd=tmp_path)


def test_dry_run_prints_points_and_the_array_script(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("sweep", "job.yaml", "--grid", "env.SEED=1,2", "--max-parallel", "3", "--dry-run")
    lines = done.stdout.splitlines()
    assert lines[:6] == [
        "sweep lr: 4 points, one job array (--array=0-3%3), backend sbatch",
        f"run dirs: {tmp_path}/runs/lr/<array job>_<point>/ (e.g. {tmp_path}/runs/lr/ARRAYJOB_0), each with its"
        " point's job.yaml",
        "  0  env.LR=0.1 env.SEED=1",
        "  1  env.LR=0.1 env.SEED=2",
        "  2  env.LR=0.01 env.SEED=1",
        "  3  env.LR=0.01 env.SEED=2",
    ]
    assert "#SBATCH --array=0-3%3" in lines
    assert f'RUN_DIR={tmp_path}/runs/lr/"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"' in lines
    assert done.stderr == ""
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home").exists()


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_a_sweep_on_the_submitit_backend_is_refused(cli: Cli, tmp_path: Path, dry_run: tuple[str, ...]) -> None:
    # Refused before anything is asked of a cluster or written; the dry run exactly as the sweep (issue 43 item
    # 17: it printed a job array's plan and exited 0).
    done = cli.run("sweep", "job.yaml", "--set", "backend=submitit", *dry_run, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "ddpctl: error: job.yaml: backend submitit: sweeps are submitted on the sbatch and local backends only "
        "yet; expected backend: sbatch or local\n"
    )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home").exists()


def test_a_local_sweep_over_the_bound_is_refused_in_one_line(cli: Cli, tmp_path: Path) -> None:
    values = ",".join(str(v) for v in range(101))
    done = cli.run("sweep", "job.yaml", "--set", "backend=local", "--grid", f"env.SEED={values}", check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "ddpctl: error: sweep lr: 202 points, but the local backend runs at most 100 points per sweep (each a full "
        "run on this machine): use fewer values, split it, or the sbatch backend\n"
    )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--zip", "nodes=2,0", "--zip", "args=[--a],[--b]"),
            "sweep point 1 (env.LR=0.1, nodes=0, args=[--b]): nodes: got 0, expected an integer in 1..16384",
        ),
        (("--grid", "nodse=1,2"), "--grid nodse: nodse: unknown key, did you mean 'nodes'?"),
        (("--grid", "env.LR=1", "--dry-run"), "--grid env.LR: key also given as job.yaml: sweep.grid env.LR"),
        (("--grid", "run_dir=a,b"), "--grid run_dir: a key the whole sweep shares, cannot vary per point"),
        (("--grid", "backend=local,sbatch"), "--grid backend: a key the whole sweep shares, cannot vary per point"),
    ],
)
def test_bad_input_is_one_line(cli: Cli, args: tuple[str, ...], message: str) -> None:
    done = cli.run("sweep", "job.yaml", *args, "--dry-run", check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"ddpctl: error: {message}")
    assert done.stderr.count("\n") == 1


def write_task(run_dir: Path, step: int, final: float, low: float, high: float) -> None:
    (run_dir / "attempt-0").mkdir(parents=True)
    (run_dir / "job.yaml").write_text("name: lr\n")
    record = {"rank": 0, "step": step, "values": {"loss": final}, "extremes": {"loss": [low, high]}}
    (run_dir / "attempt-0" / "progress-0.json").write_text(json.dumps(record))


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    base = tmp_path / "runs" / "lr"
    write_task(base / "7_0", 10, 0.5, 0.4, 2.0)
    write_task(base / "7_1", 12, 0.3, 0.3, 1.0)
    write_task(base / "7_\x1b]0;x\x07", 9, 0.9, 0.8, 1.0)  # a name that would set the terminal's title
    return base


def test_results_table_json_csv(cli: Cli, sweep_dir: Path) -> None:
    done = cli.run("sweep", "results", str(sweep_dir))
    assert done.stdout.splitlines() == [  # no job of the registry has these run dirs: no state column
        "   run         step  loss final  loss min",
        "*  7_1           12         0.3       0.3",
        "   7_0           10         0.5       0.4",
        "   7_^[]0;x^G     9         0.9       0.8",
    ]
    assert done.stderr == "no job in the registry has these run dirs: no state to show\n"
    rows = [json.loads(line) for line in cli.run("sweep", "results", str(sweep_dir), "--json").stdout.splitlines()]
    assert [(r["run"], r["state"], r["step"], r["final"], r["best"], r["best_point"]) for r in rows] == [
        ("7_1", None, 12, {"loss": 0.3}, 0.3, True),
        ("7_0", None, 10, {"loss": 0.5}, 0.4, False),
        ("7_\x1b]0;x\x07", None, 9, {"loss": 0.9}, 0.8, False),
    ]
    csv = cli.run("sweep", "results", str(sweep_dir / "7_1"), str(sweep_dir / "7_0"), "--csv", "--mode", "max")
    assert csv.stdout.splitlines() == [
        "point,run,run_dir,state,step,loss_final,loss_max,best_point",
        f",7_0,{sweep_dir}/7_0,,10,0.5,2.0,1",
        f",7_1,{sweep_dir}/7_1,,12,0.3,1.0,0",
    ]


def test_results_of_a_missing_dir_or_sweep_is_one_line(cli: Cli, tmp_path: Path) -> None:
    done = cli.run("sweep", "results", str(tmp_path / "nope"), check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ddpctl: error: sweep results: '{tmp_path}/nope': no such directory, and no sweep of that name or array "
        "job id in the registry\n"
    )
    (tmp_path / "file").write_text("")
    done = cli.run("sweep", "results", str(tmp_path / "file"), check=False)
    assert (done.returncode, done.stderr) == (
        2,
        f"ddpctl: error: {tmp_path}/file: not a run dir or a directory of run dirs (Not a directory)\n",
    )


def test_a_sweep_with_an_unknown_cluster_is_one_line_and_not_rendered_or_run_here(cli: Cli, tmp_path: Path) -> None:
    profiles = tmp_path / "clusters.yaml"  # absent: no cluster defined
    cli = Cli(tmp_path / "home", cwd=tmp_path, extra_env={"DDPCTL_CLUSTERS": str(profiles)})
    for extra in (("--set", "cluster=gpu"), ("--set", "cluster=gpu", "--dry-run"), ("--cluster", "gpu")):
        done = cli.run("sweep", "job.yaml", *extra, check=False)
        assert (done.returncode, done.stdout) == (2, ""), done
        where = "job.yaml: cluster: " if extra[0] == "--set" else ""
        assert done.stderr == (
            f"ddpctl: error: {where}unknown cluster 'gpu': no clusters defined in {profiles} "
            "(README: From your laptop)\n"
        )
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home").exists()


def test_an_axis_over_a_shared_key_is_refused_at_submit_too(cli: Cli, tmp_path: Path) -> None:
    """Issue 43 item 9: a sweep over its own name, run dir, cluster or backend is refused before anything is
    written (it ran every point in one place, under one name, on one backend, whatever job.yaml said)."""
    for args in (("--grid", "name=a,b"), ("--zip", "run_dir=x,y", "--zip", "env.SEED=1,2")):
        done = cli.run("sweep", "job.yaml", "--set", "backend=local", *args, check=False)
        assert (done.returncode, done.stdout) == (2, ""), done
        key = args[1].partition("=")[0]
        assert done.stderr.startswith(f"ddpctl: error: {args[0]} {key}: a key the whole sweep shares"), done.stderr
        assert done.stderr.count("\n") == 1
    (tmp_path / "job.yaml").write_text(SPEC.replace("env.LR: [0.1, 0.01]", "cluster: [a, b]"))
    done = cli.run("sweep", "job.yaml", "--dry-run", check=False)
    assert done.stderr.startswith("ddpctl: error: job.yaml: sweep.grid cluster: a key the whole sweep shares")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home").exists()
