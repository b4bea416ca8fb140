"""Run-dir paths are data, never format strings (issue 10 #6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.run.layout import fill_rank, slurm_filename


@pytest.mark.parametrize(
    ("pattern", "rank", "path"),
    [
        ("/r/attempt-0/rank-{rank}.log", "3", "/r/attempt-0/rank-3.log"),
        ("/r/{x}/attempt-0/rank-{rank}.log", "3", "/r/{x}/attempt-0/rank-3.log"),
        ("/r/{rank}/{0}/{}/attempt-0/rank-{rank}.log", "0", "/r/{rank}/{0}/{}/attempt-0/rank-0.log"),
        ("/r/{/}}/a%s%j/rank-{rank}.log", "12", "/r/{/}}/a%s%j/rank-12.log"),
    ],
)
def test_fill_rank_touches_only_the_file_name(pattern: str, rank: str, path: str) -> None:
    assert fill_rank(pattern, rank) == Path(path)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/runs/x", "/runs/x"),
        ("/runs/50%/x", "/runs/50%%/x"),
        ("/r/%j%%/x", "/r/%%j%%%%/x"),
    ],
)
def test_slurm_filename_escapes_percent(path: str, text: str) -> None:
    assert slurm_filename(Path(path)) == text


def test_job_sbatch_and_render_output_follow_the_umask(tmp_path: Path) -> None:
    """Both hold the spec's env values: under umask 077 nobody else may read them, and nothing needs +x."""
    import dataclasses
    import os
    import subprocess
    import sys

    from clitools import REPO

    from ddpctl.run.rundir import staging
    from ddpctl.spec import load_spec, resolve_paths

    spec = resolve_paths(load_spec(REPO / "jobs/example.yaml"), REPO)
    spec = dataclasses.replace(spec, run_dir=str(tmp_path / "runs"))
    old = os.umask(0o077)
    try:
        with staging(spec, "#!/bin/bash\ntrue\n") as stage:
            assert stage.script_file.stat().st_mode & 0o777 == 0o600
        done = subprocess.run(
            [
                "sh",
                "-c",
                f'umask 077 && exec "{sys.executable}" -m ddpctl render jobs/example.yaml -o "{tmp_path / "out.sh"}"',
            ],
            cwd=REPO,
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "out.sh").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
    done = subprocess.run(
        [
            "sh",
            "-c",
            f'umask 022 && exec "{sys.executable}" -m ddpctl render jobs/example.yaml -o "{tmp_path / "out.sh"}"',
        ],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (tmp_path / "out.sh").stat().st_mode & 0o777 == 0o644
