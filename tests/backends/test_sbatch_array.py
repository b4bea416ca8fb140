"""Submitting a sweep's job array (ddpctl.backends.slurm.array) through our own Runner seam: held, every task's
run dir written under the returned id before the release, and on any failure the array cancelled with nothing of
it left on disk."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ddpctl.backends.slurm.array import submit_array
from ddpctl.backends.slurm.sbatch import SbatchBackend
from ddpctl.errors import CommandError
from ddpctl.plan.sweep import ArrayPlan, plan_sweep
from ddpctl.proc import Completed
from ddpctl.snapshot import pin
from ddpctl.spec import load_spec
from ddpctl.spec.sweepload import load_sweep

SPEC = """\
name: sw
script: train.py
nodes: 2
time: "00:10:00"
run_dir: runs
requeue: {mode: requeue}
env: {OMP_NUM_THREADS: "1"}
"""


class FakeSlurm:
    """sbatch answers job 77; `release_rc` decides scontrol release's outcome, `sbatch_rc` sbatch's. At the
    release it notes which task run dirs hold their job.yaml."""

    def __init__(self, base: Path, *, sbatch_rc: int = 0, release_rc: int = 0) -> None:
        self.base, self.sbatch_rc, self.release_rc = base, sbatch_rc, release_rc
        self.calls: list[tuple[str, ...]] = []
        self.ready_at_release: list[str] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(tuple(argv))
        if argv[0] == "sbatch":
            return Completed(tuple(argv), self.sbatch_rc, "77\n" if not self.sbatch_rc else "", "sbatch: error: no")
        if list(argv[:2]) == ["scontrol", "release"]:
            self.ready_at_release = sorted(p.parent.name for p in self.base.glob("77_*/job.yaml"))
            return Completed(tuple(argv), self.release_rc, "", "" if not self.release_rc else "release refused")
        return Completed(tuple(argv), 0, "", "")

    def called(self, *head: str) -> list[tuple[str, ...]]:
        return [call for call in self.calls if call[: len(head)] == head]


@pytest.fixture
def plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ArrayPlan:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text(SPEC)
    return plan_sweep(load_sweep(tmp_path / "job.yaml", grid=["env.LR=0.1,0.01"], max_parallel=1))


def test_held_then_released_once_every_run_dir_is_written(plan: ArrayPlan) -> None:
    slurm = FakeSlurm(plan.run_base)
    records = submit_array(SbatchBackend(runner=slurm), plan, Path("job.yaml"), "the cluster requeues")
    (sbatch,) = slurm.called("sbatch")
    assert "--hold" in sbatch
    assert slurm.called("scontrol", "release") == [("scontrol", "release", "77")]
    assert slurm.ready_at_release == ["77_0", "77_1"]
    assert [(r.job_id, r.sweep, r.point) for r in records] == [
        ("77_0", "77", "env.LR=0.1"),
        ("77_1", "77", "env.LR=0.01"),
    ]
    assert "LR: '0.01'" in (plan.run_base / "77_1" / "job.yaml").read_text()
    assert not (plan.run_base / "77_1" / "job.sbatch").exists()  # its one job is the array's task
    # Each task runs its own copy of the code, as every run does: what one task writes beside its script (a
    # changed helper module, a leftover file) never reaches another (they shared sweep-77/code).
    for task in ("77_0", "77_1"):
        info = json.loads((plan.run_base / task / "snapshot.json").read_text())
        assert (info["path"], info["script"]) == ("code", "code/train.py")
        script = plan.run_base / task / "code" / "train.py"
        assert script.read_text() == "print('hi')\n"
        assert pin(load_spec(plan.run_base / task / "job.yaml"), plan.run_base / task / "snapshot.json").script == str(
            script
        )
    (plan.run_base / "77_0" / "code" / "train.py").write_text("changed by task 0\n")
    (plan.run_base / "77_0" / "code" / "leftover.py").write_text("")
    assert (plan.run_base / "77_1" / "code" / "train.py").read_text() == "print('hi')\n"
    assert sorted(p.name for p in (plan.run_base / "77_1" / "code").iterdir()) == ["job.yaml", "train.py"]
    assert not (plan.run_base / "sweep-77" / "code").exists()
    assert sorted(p.name for p in plan.run_base.iterdir()) == [
        ".slurm-77_0.out",
        ".slurm-77_1.out",
        "77_0",
        "77_1",
        "sweep-77",
    ]


def test_a_task_dir_in_the_way_cancels_the_held_array_and_leaves_nothing(plan: ArrayPlan) -> None:
    (plan.run_base / "77_1").mkdir(parents=True)  # someone else's: another registry sharing this run_dir
    slurm = FakeSlurm(plan.run_base)
    with pytest.raises(FileExistsError, match=r"run dir .*77_1 already exists"):
        submit_array(SbatchBackend(runner=slurm), plan, Path("job.yaml"), "")
    assert slurm.called("scancel") == [("scancel", "77")]
    assert slurm.called("scontrol", "release") == []  # never released: no task ever started
    assert [p.name for p in plan.run_base.iterdir()] == ["77_1"]  # only what was there before
    assert list((plan.run_base / "77_1").iterdir()) == []


def test_a_refused_release_cancels_the_array_and_leaves_nothing(plan: ArrayPlan) -> None:
    slurm = FakeSlurm(plan.run_base, release_rc=1)
    with pytest.raises(CommandError, match="release refused"):
        submit_array(SbatchBackend(runner=slurm), plan, Path("job.yaml"), "")
    assert slurm.called("scancel") == [("scancel", "77")]
    assert list(plan.run_base.iterdir()) == []


def test_a_refused_sbatch_leaves_nothing(plan: ArrayPlan) -> None:
    slurm = FakeSlurm(plan.run_base, sbatch_rc=1)
    with pytest.raises(CommandError, match="no"):
        submit_array(SbatchBackend(runner=slurm), plan, Path("job.yaml"), "")
    assert slurm.called("scancel") == [] and list(plan.run_base.iterdir()) == []


def tracked(plan: ArrayPlan, tmp_path: Path) -> ArrayPlan:
    """The plan with W&B and MLflow tracking (a file store under tmp_path) for every point."""
    store = (tmp_path / "mlruns").as_uri()
    env = (("MLFLOW_TRACKING_URI", store), ("MLFLOW_ALLOW_FILE_STORE", "true"))
    points = tuple((point, replace(spec, tracking=("wandb", "mlflow"), env=env)) for point, spec in plan.sweep.points)
    return replace(plan, sweep=replace(plan.sweep, points=points))


def mlflow_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    return [(run.data.tags["ddpctl.job"], run.info.lifecycle_stage) for run in sweep_runs(tmp_path, monkeypatch)]


def sweep_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The MLflow runs of the sweep's experiment, by name."""
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    (experiment,) = [e for e in client.search_experiments(view_type=3) if e.name == "sw"]
    return sorted(client.search_runs([experiment.experiment_id], run_view_type=3), key=lambda r: r.info.run_name)


def test_each_task_is_its_own_tracker_run_grouped_by_the_sweep(
    plan: ArrayPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit_array(SbatchBackend(runner=FakeSlurm(plan.run_base)), tracked(plan, tmp_path), Path("job.yaml"), "")
    found = [json.loads((plan.run_base / f"77_{i}" / "tracking.json").read_text()) for i in (0, 1)]
    assert [record["group"] for record in found] == ["sw", "sw"]
    assert found[0]["wandb"]["id"] != found[1]["wandb"]["id"]
    assert found[0]["mlflow"]["run_id"] != found[1]["mlflow"]["run_id"]
    assert mlflow_runs(tmp_path, monkeypatch) == [("sw_0", "active"), ("sw_1", "active")]


def test_a_tasks_tracker_run_is_named_and_tagged_by_its_task_and_point(
    plan: ArrayPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43 item 11: every task's MLflow run was named `sw` with no task tag."""
    submit_array(SbatchBackend(runner=FakeSlurm(plan.run_base)), tracked(plan, tmp_path), Path("job.yaml"), "")
    runs = sweep_runs(tmp_path, monkeypatch)
    assert [run.info.run_name for run in runs] == ["sw_0", "sw_1"]
    tags = [{k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")} for run in runs]
    assert tags == [
        {"ddpctl.job": f"sw_{i}", "ddpctl.sweep": "sw", "ddpctl.task": str(i), "ddpctl.point": f"env.LR={lr}",
         "point.env.LR": lr}
        for i, lr in ((0, "0.1"), (1, "0.01"))
    ]  # fmt: skip


def test_a_refused_sbatch_deletes_the_tasks_tracker_runs(
    plan: ArrayPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm = FakeSlurm(plan.run_base, sbatch_rc=1)
    with pytest.raises(CommandError):
        submit_array(SbatchBackend(runner=slurm), tracked(plan, tmp_path), Path("job.yaml"), "")
    assert mlflow_runs(tmp_path, monkeypatch) == [("sw_0", "deleted"), ("sw_1", "deleted")]
    assert list(plan.run_base.iterdir()) == []


def test_a_chained_sweep_gives_each_task_its_successors_script(tmp_path: Path, plan: ArrayPlan) -> None:
    # (`plan` only prepares the directory; without chain mode no task gets a script: the held test checks.)
    chained = plan_sweep(load_sweep(tmp_path / "job.yaml", ["requeue.mode=chain"], grid=["env.LR=0.1,0.01"]))
    assert chained.successor is not None
    submit_array(SbatchBackend(runner=FakeSlurm(chained.run_base)), chained, Path("job.yaml"), "chain asked")
    for task in ("77_0", "77_1"):
        assert (chained.run_base / task / "job.sbatch").read_text() == chained.successor


def test_cancel_of_a_chained_sweep_ends_the_successors_outside_the_array(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "job.yaml").write_text(SPEC)
    chained = plan_sweep(load_sweep(tmp_path / "job.yaml", ["requeue.mode=chain"], grid=["env.LR=0.1,0.01"]))
    records = submit_array(SbatchBackend(runner=FakeSlurm(chained.run_base)), chained, Path("job.yaml"), "")
    # Task 1 went on in job 90 (a chained successor, not in array 77).
    events = Path(records[1].run_dir) / "events.jsonl"
    with events.open("a") as out:
        out.write(json.dumps({"event": "chain-submit", "t": 1.0, "attempt": 0, "job_id": "90"}) + "\n")
    slurm = FakeSlurm(chained.run_base)
    SbatchBackend(runner=slurm).cancel_array("77", records)
    cancelled = [call[1] for call in slurm.called("scancel")]
    assert "90" in cancelled and cancelled[-1] == "77", slurm.calls
    # Its run is marked cancelled first, so a successor submitted meanwhile never trains.
    assert all((Path(record.run_dir) / "cancel-request.json").exists() for record in records)
    # A sweep of tasks that requeue themselves: one scancel of the array, nothing else.
    plain = FakeSlurm(chained.run_base)
    SbatchBackend(runner=plain).cancel_array("77", [replace(r, run_dir=str(tmp_path / "none")) for r in records])
    assert plain.called("scancel") == [("scancel", "77")]
