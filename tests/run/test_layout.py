"""Run-dir paths are data, never format strings (issue 10 #6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.run.layout import fill_rank, slurm_filename


@pytest.mark.parametrize(("pattern", "rank", "path"), [
    ("/r/attempt-0/rank-{rank}.log", "3", "/r/attempt-0/rank-3.log"),
    ("/r/{x}/attempt-0/rank-{rank}.log", "3", "/r/{x}/attempt-0/rank-3.log"),
    ("/r/{rank}/{0}/{}/attempt-0/rank-{rank}.log", "0", "/r/{rank}/{0}/{}/attempt-0/rank-0.log"),
    ("/r/{/}}/a%s%j/rank-{rank}.log", "12", "/r/{/}}/a%s%j/rank-12.log"),
])
def test_fill_rank_touches_only_the_file_name(pattern: str, rank: str, path: str) -> None:
    assert fill_rank(pattern, rank) == Path(path)


@pytest.mark.parametrize(("path", "text"), [
    ("/runs/x", "/runs/x"), ("/runs/50%/x", "/runs/50%%/x"), ("/r/%j%%/x", "/r/%%j%%%%/x"),
])
def test_slurm_filename_escapes_percent(path: str, text: str) -> None:
    assert slurm_filename(Path(path)) == text
