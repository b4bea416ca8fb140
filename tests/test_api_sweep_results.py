"""`ddpctl sweep results NAME`'s choices in the API (ddpctl.api.sweeps): which run dirs a sweep's name, array job
id or directory means, and which registry record each run dir is (its state column). Literal tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.api.sweeps import records_for, result_dirs
from ddpctl.errors import JobNotFound
from ddpctl.run.registry import JobRecord


def record(job_id: str, run_dir: str, sweep: str | None = None, name: str = "lr") -> JobRecord:
    return JobRecord(job_id=job_id, name=name, run_dir=run_dir, backend="sbatch", submitted_at=0.0, sweep=sweep)


def task_dir(base: Path, name: str) -> Path:
    (base / name).mkdir(parents=True)
    (base / name / "job.yaml").write_text("name: lr\n")
    return base / name


def test_result_dirs_of_a_sweep_name_an_array_job_and_a_directory(tmp_path: Path) -> None:
    base = tmp_path / "runs" / "lr"
    dirs = [task_dir(base, f"7_{i}") for i in range(3)]
    records = [
        record("7_1", str(dirs[1]), "7"),
        record("7_0", str(dirs[0]), "7"),
        record("9", "/elsewhere", None, "plain"),
    ]
    # By name and by array job id: the registry's tasks by index (7_2 was never recorded, so it is not one).
    assert result_dirs(["lr"], records) == [dirs[0], dirs[1]]
    assert result_dirs(["7"], records) == [dirs[0], dirs[1]]
    assert result_dirs([str(base)], records) == dirs  # a directory: every run dir in it
    assert result_dirs([str(dirs[2]), "7"], records) == [dirs[2], dirs[0], dirs[1]]
    with pytest.raises(JobNotFound, match="'9': no such directory, and no sweep of that name"):
        result_dirs(["9"], records)  # a plain job is not a sweep


def test_a_directory_wins_over_a_sweep_of_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    task_dir(tmp_path / "lr", "1_0")
    assert result_dirs(["lr"], [record("7_0", "/r/7_0", "7")]) == [Path("lr/1_0")]


def test_records_for_run_dirs(tmp_path: Path) -> None:
    real = task_dir(tmp_path, "7_0")
    (tmp_path / "link").symlink_to(real)
    records = [record("7_0", str(real), "7"), record("8", str(tmp_path / "8"))]
    assert {k: r.job_id for k, r in records_for(records, [real]).items()} == {str(real): "7_0"}
    # Named through a link: still the record of the real run dir; an unknown dir has none.
    assert list(records_for(records, [tmp_path / "link", tmp_path / "other"])) == [str(real)]
