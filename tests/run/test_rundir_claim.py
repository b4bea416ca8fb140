"""A run dir's name is claimed in one place (run.rundir.claim): a single job's commit and a sweep's (its
`sweep-<job>` dir and each task's `<job>_<task>`) take it by mkdir and refuse a taken one with the same line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.backends.slurm import array as sbatch_array
from ddpctl.run import rundir
from ddpctl.run.rundir import RunDirTaken, claim


def test_a_free_name_is_claimed_empty_and_a_taken_one_is_refused_in_one_line(tmp_path: Path) -> None:
    base = tmp_path / "runs" / "far"
    base.mkdir(parents=True)
    assert claim(base / "7") == base / "7" and list((base / "7").iterdir()) == []
    with pytest.raises(RunDirTaken) as caught:
        claim(base / "7")
    assert str(caught.value) == (
        f"run dir {base / '7'} already exists: another registry (DDPCTL_HOME) or tool uses the run_dir "
        f"{tmp_path / 'runs'} too; job ids there must be unique"
    )
    assert isinstance(caught.value, FileExistsError) and caught.value.exit_code == 1


def test_the_sweeps_commit_claims_through_the_same_function() -> None:
    assert vars(sbatch_array)["claim"] is rundir.claim
