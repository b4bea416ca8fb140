"""A sweep's job array (ddpctl.plan.sweep): one batch script for every task, each task's run dir named after
its array job and task, a point that would need another script refused in one line. Pure: renders only."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.plan.render import render_for
from ddpctl.plan.sweep import plan_sweep
from ddpctl.spec import load_spec
from ddpctl.spec.sweepload import load_sweep

SPEC = """\
name: base
script: train.py
nodes: 2
time: "00:10:00"
run_dir: runs
env: {OMP_NUM_THREADS: "1"}
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


def test_array_script_runs_each_task_in_its_own_run_dir(spec_file: Path) -> None:
    plan = plan_sweep(load_sweep(spec_file, grid=["env.LR=0.1,0.01", "args=[--a],[--b]"], max_parallel=2))
    assert plan.array == "0-3%2"
    assert plan.script is not None
    base = spec_file.parent / "runs" / "base"
    lines = plan.script.splitlines()
    assert "#SBATCH --array=0-3%2" in lines
    assert f"#SBATCH --output={base}/.slurm-%A_%a.out" in lines
    assert f'RUN_DIR={base}/"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"' in lines
    # the batch shell exports the spec's own env; the points' values go to the ranks through job.yaml
    assert "export OMP_NUM_THREADS=1" in lines
    assert not [line for line in lines if "LR=" in line]
    assert [(p.index, s.env) for p, s in plan.sweep.points] == [
        (0, (("OMP_NUM_THREADS", "1"), ("LR", "0.1"))),
        (1, (("OMP_NUM_THREADS", "1"), ("LR", "0.1"))),
        (2, (("OMP_NUM_THREADS", "1"), ("LR", "0.01"))),
        (3, (("OMP_NUM_THREADS", "1"), ("LR", "0.01"))),
    ]


def test_array_script_is_the_plain_script_plus_the_array(spec_file: Path) -> None:
    plain = render_for(load_spec(spec_file)).splitlines()
    plan = plan_sweep(load_sweep(spec_file, grid=["args=[--a],[--b]"]))
    assert plan.script is not None
    base = spec_file.parent / "runs" / "base"
    changed = {
        f"#SBATCH --output={base}/.slurm-%j.out": f"#SBATCH --output={base}/.slurm-%A_%a.out",
        f'RUN_DIR={base}/"${{SLURM_JOB_ID}}"': f'RUN_DIR={base}/"${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"',
    }
    expected = [changed.get(line, line) for line in plain]
    last_option = max(i for i, line in enumerate(expected) if line.startswith("#SBATCH "))
    expected.insert(last_option + 1, "#SBATCH --array=0-1")
    assert plan.script.splitlines() == expected


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (
            ["nodes=2,3"],
            "sweep point 1 (nodes=3): its batch script has '#SBATCH --nodes=3' where point 0's has "
            "'#SBATCH --nodes=2'; one job array runs one script",
        ),
        (
            ["env.LR=1,2", "time=00:10:00,1:00:00"],
            "sweep point 1 (env.LR=1, time=1:00:00): its batch script has '#SBATCH --time=1:00:00' where point 0's",
        ),
        (["setup=[a],[b]"], "sweep point 1 (setup=[b]): its batch script has 'b' where point 0's has 'a'"),
    ],
)
def test_point_needing_another_script_is_refused(spec_file: Path, grid: list[str], message: str) -> None:
    with pytest.raises(SpecError) as err:
        plan_sweep(load_sweep(spec_file, grid=grid))
    assert str(err.value).startswith(message)


def test_one_value_of_a_script_key_is_fine(spec_file: Path) -> None:
    plan = plan_sweep(load_sweep(spec_file, grid=["nodes=4", "env.LR=1,2"]))
    assert plan.script is not None and "#SBATCH --nodes=4" in plan.script.splitlines()


def test_a_chained_tasks_successor_runs_the_single_jobs_script(spec_file: Path) -> None:
    # requeue.mode chain: each task continues in a plain job (never a new array) on its run dir, its argument.
    plan = plan_sweep(load_sweep(spec_file, ["requeue.mode=chain"], grid=["env.LR=1,2"]))
    assert plan.script is not None and plan.successor is not None
    assert "#SBATCH --array=0-1" in plan.script.splitlines()
    assert plan.successor == render_for(load_spec(spec_file, ["requeue.mode=chain"]))
    # Its only word of arrays: a task falling back to its own requeue (a refused successor) names itself as one.
    arrays = [line.strip() for line in plan.successor.splitlines() if "--array" in line or "SLURM_ARRAY" in line]
    assert arrays == [
        'if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then requeue_id="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"; fi'
    ]
    assert 'internal chain-next "$RUN_DIR"' in plan.successor and 'internal chain-next "$RUN_DIR"' in plan.script
    # Without chain mode no task has a successor script.
    assert plan_sweep(load_sweep(spec_file, ["requeue.mode=requeue"], grid=["env.LR=1,2"])).successor is None


def test_backend_without_a_script_lists_the_points_only(spec_file: Path) -> None:
    plan = plan_sweep(load_sweep(spec_file, ["backend=submitit"], grid=["env.LR=1,2"]))
    assert plan.script is None
    assert plan.text().splitlines()[-1] == (
        "backend submitit: a sweep is planned as a Slurm job array of the sbatch backend only"
    )


def test_local_backend_plans_a_queue(spec_file: Path) -> None:
    plan = plan_sweep(load_sweep(spec_file, ["backend=local"], grid=["env.LR=1,2"], max_parallel=2))
    assert plan.script is None
    assert plan.text().splitlines()[-1] == (
        "backend local: one detached queue on this machine runs 2 at a time, each a local job"
    )


def test_text_lists_points_in_order(spec_file: Path) -> None:
    text = plan_sweep(load_sweep(spec_file, grid=["env.LR=1,2"], zipped=["args=[--a],[--b]"])).text()
    base = spec_file.parent / "runs" / "base"
    assert text.splitlines()[:6] == [
        "sweep base: 4 points, one job array (--array=0-3), backend sbatch",
        f"run dirs: {base}/<array job>_<point>/ (e.g. {base}/ARRAYJOB_0), each with its point's job.yaml",
        "  0  env.LR=1 args=[--a]",
        "  1  env.LR=1 args=[--b]",
        "  2  env.LR=2 args=[--a]",
        "  3  env.LR=2 args=[--b]",
    ]


@pytest.mark.parametrize(
    ("count", "max_array_size", "message"),
    [
        (40, 40, None),  # indexes 0-39: the most the cluster allows
        (1, 1, None),
        (1001, None, None),  # the cluster's value unknown: sbatch decides
        (
            41,
            40,
            "sweep lr: 41 points, but this cluster's MaxArraySize is 40 (array indexes 0-39): at most 40 points in "
            "one sweep; use fewer values or split it",
        ),
        (2, 1, "sweep lr: 2 points, but this cluster's MaxArraySize is 1 (array indexes 0-0): at most 1 points"),
    ],
)
def test_max_array_size_refused_before_sbatch(count: int, max_array_size: int | None, message: str | None) -> None:
    from ddpctl.plan.sweep import check_array_size

    if message is None:
        check_array_size("lr", count, max_array_size)
        return
    with pytest.raises(SpecError) as err:
        check_array_size("lr", count, max_array_size)
    assert str(err.value).startswith(message)


def test_auto_requeue_mode_is_decided_for_every_point(spec_file: Path) -> None:
    from ddpctl.plan.sweep import with_requeue_mode
    from ddpctl.slurm.cluster import ClusterFacts

    sweep = load_sweep(spec_file, grid=["env.LR=0.1,0.01", "requeue.max_failures=1,2"])
    decided, why = with_requeue_mode(sweep, ClusterFacts(config_read=True, job_requeue=1, cred_expire_s=5))
    assert decided.spec.requeue.mode == "requeue" and why
    assert [(s.requeue.mode, s.requeue.max_failures) for _, s in decided.points] == [
        ("requeue", 1),
        ("requeue", 2),
        ("requeue", 1),
        ("requeue", 2),
    ]
