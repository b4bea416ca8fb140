"""Names: duplicates refused, an ambiguous name means the running job, typos get "did you mean"."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from clitools import ddpctl_in

from ddpctl.backends.names import DuplicateName, check_duplicate, possibly_live, resolve
from ddpctl.errors import JobNotFound
from ddpctl.proc import Completed
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState

REPO = Path(__file__).resolve().parents[2]


def registry(tmp_path: Path, *jobs: tuple[str, str]) -> Registry:
    reg = Registry(tmp_path)
    for n, (job_id, name) in enumerate(jobs):
        reg.add(JobRecord(job_id=job_id, name=name, run_dir="/x", backend="sbatch", submitted_at=float(n)))
    return reg


KEEP = list  # no squeue prefilter: the table answers for every record


def states(table: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda record: JobState(table[record.job_id])


@pytest.mark.parametrize(
    ("table", "chosen", "told"),
    [
        ({"1": "RUNNING", "2": "PENDING"}, "1", True),  # never silently the pending one
        ({"1": "RUNNING", "2": "RUNNING"}, "2", True),  # two running: the newest of them, and the other named
        ({"1": "PENDING", "2": "RUNNING"}, "2", True),  # the newest, but another one is live too
        # Said only where it matters: the newest is the only live one, or none is live (ended jobs are history).
        ({"1": "COMPLETED", "2": "PENDING"}, "2", False),
        ({"1": "COMPLETED", "2": "RUNNING"}, "2", False),
        ({"1": "COMPLETED", "2": "FAILED"}, "2", False),
    ],
)
def test_ambiguous_name(tmp_path: Path, table: dict[str, str], chosen: str, told: bool) -> None:
    said: list[str] = []
    reg = registry(tmp_path, ("1", "ex"), ("2", "ex"), ("3", "other"))
    assert resolve(reg, "ex", states(table), said.append, KEEP).job_id == chosen
    if told:
        assert len(said) == 1 and f"name 'ex' has 2 jobs; using job {chosen}" in said[0], said
    else:
        assert said == []


def test_unique_name_and_id_resolve_silently(tmp_path: Path) -> None:
    said: list[str] = []
    reg = registry(tmp_path, ("1", "ex"), ("2", "ex"), ("3", "other"))
    assert resolve(reg, "other", states({}), said.append).job_id == "3"
    assert resolve(reg, "1", states({}), said.append).job_id == "1"
    assert said == []


def test_unknown_name_did_you_mean(tmp_path: Path) -> None:
    reg = registry(tmp_path, ("1", "example"))
    with pytest.raises(JobNotFound, match="did you mean 'example'"):
        resolve(reg, "exampel", states({}))
    with pytest.raises(JobNotFound, match=r"\(names: example\)"):
        resolve(reg, "zzz", states({}))


@pytest.mark.parametrize(
    ("state", "refused"),
    [
        ("RUNNING", True),
        ("PENDING", True),
        ("REQUEUED", True),
        ("COMPLETED", False),
        ("CANCELLED", False),
        ("UNKNOWN", False),
    ],
)
def test_duplicate(tmp_path: Path, state: str, refused: bool) -> None:
    reg = registry(tmp_path, ("7", "ex"))
    if refused:
        with pytest.raises(DuplicateName, match=f"job 7 of that name is still {state}.*--allow-duplicate"):
            check_duplicate(reg, "ex", states({"7": state}), KEEP)
    else:
        check_duplicate(reg, "ex", states({"7": state}), KEEP)
    check_duplicate(reg, "other", states({}))


class Squeue:
    """A Runner that answers squeue from a set of queued job ids, and counts its calls."""

    def __init__(self, queued: set[str], returncode: int = 0, stderr: str = "") -> None:
        self.queued, self.returncode, self.stderr, self.calls = queued, returncode, stderr, []  # type: ignore[var-annotated]

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(list(argv))
        asked = argv[argv.index("-j") + 1].split(",")
        out = "".join(f"{j}|RUNNING|None|n1|0:01\n" for j in asked if j in self.queued)
        return Completed(tuple(argv), self.returncode, out if self.returncode == 0 else "", self.stderr)


def records(*jobs: tuple[str, str]) -> list[JobRecord]:
    return [JobRecord(job_id=j, name="ex", run_dir="/x", backend=b, submitted_at=0.0) for j, b in jobs]


@pytest.mark.parametrize(
    ("queued", "kept"),
    [
        (set(), ["local-1"]),  # the local backend's records are always asked one by one
        ({"5"}, ["5", "local-1"]),
        ({"4", "6"}, ["4", "6", "local-1"]),
    ],
)
def test_possibly_live_asks_squeue_once_for_every_slurm_record(queued: set[str], kept: list[str]) -> None:
    runner = Squeue(queued)
    given = records(("4", "sbatch"), ("5", "submitit"), ("6", "sbatch"), ("local-1", "local"))
    assert [r.job_id for r in possibly_live(given, runner)] == kept
    assert runner.calls == [["squeue", "-h", "-o", "%i|%T|%r|%N|%M", "-j", "4,5,6"]]


def test_possibly_live_keeps_everything_when_squeue_cannot_answer() -> None:
    given = records(("4", "sbatch"), ("5", "sbatch"))
    assert possibly_live(given, Squeue(set(), 1, "slurm_load_jobs error: Unable to contact slurm controller")) == given
    # A single id Slurm has forgotten fails squeue, and means "not queued".
    assert possibly_live(given[:1], Squeue(set(), 1, "slurm_load_jobs error: Invalid job id specified")) == []


def test_cli_refuses_a_second_live_job_of_a_name(tmp_path: Path) -> None:
    script = tmp_path / "sleepy.py"
    script.write_text("from ddpctl import runtime\nimport time\ntime.sleep(60)\n")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "sleepy",
                "script": str(script),
                "run_dir": str(tmp_path / "runs"),
                "backend": "local",
                "nproc_per_node": 1,
            }
        )
    )
    env = {"DDPCTL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    ddpctl = ddpctl_in(tmp_path, env)

    first = ddpctl("submit", str(spec))
    try:
        assert first.returncode == 0, first.stderr
        second = ddpctl("submit", str(spec))
        assert second.returncode == 2 and "job local-1 of that name is still RUNNING" in second.stderr, second
        allowed = ddpctl("submit", str(spec), "--allow-duplicate")
        assert allowed.returncode == 0, allowed.stderr
        status = ddpctl("status", "sleepy", "--json")
        assert status.returncode == 0 and "name 'sleepy' has 2 jobs" in status.stderr, status
    finally:
        for job in ("local-1", "local-2"):
            ddpctl("cancel", job)


def sweep_registry(tmp_path: Path) -> Registry:
    reg = registry(tmp_path, ("1", "lr_2"), ("2", "solo"))
    for n, task in enumerate(("7_0", "7_1", "7_2")):
        reg.add(JobRecord(job_id=task, name="lr", run_dir="/x", backend="sbatch", submitted_at=3.0 + n, sweep="7"))
    return reg


@pytest.mark.parametrize(
    ("ref", "chosen"),
    [
        ("lr_1", "7_1"),  # the sweep's name and a task
        ("7_2", "7_2"),  # a task id is a job id
        ("lr_2", "1"),  # a job of that very name wins over the sweep's task 2
    ],
)
def test_a_sweep_task_by_the_sweeps_name(tmp_path: Path, ref: str, chosen: str) -> None:
    said: list[str] = []
    assert resolve(sweep_registry(tmp_path), ref, states({}), said.append, KEEP).job_id == chosen
    assert said == []


def test_a_sweep_task_that_does_not_exist_names_the_tasks(tmp_path: Path) -> None:
    with pytest.raises(JobNotFound) as err:
        resolve(sweep_registry(tmp_path), "lr_5", states({}), print, KEEP)
    assert str(err.value) == "job 'lr_5': sweep lr has no such task; its tasks: 7_0, 7_1, 7_2"
