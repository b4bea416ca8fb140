"""Faults found by the adversarial pass (issue 10), each reproduced on the real local backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import REPO, Cli, write_spec

pytestmark = pytest.mark.torchrun

ARGS = ["--epochs", "1", "--samples", "512", "--ckpt-every", "1"]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty)})


def spec(tmp_path: Path, name: str, **extra: object) -> Path:
    fields = {"name": name, "script": str(REPO / "jobs/example/train.py"), "args": ARGS, "nodes": 2,
              "nproc_per_node": 1, "run_dir": str(tmp_path / "runs"), "env": {"OMP_NUM_THREADS": "1"},
              "backend": "local", **extra}
    return write_spec(tmp_path / f"{name}.yaml", **fields)


def test_item1_a_run_with_another_world_size_never_deletes_the_first_runs_checkpoints(
    cli: Cli, tmp_path: Path
) -> None:
    ck = tmp_path / "ck"
    first, _ = cli.submit(spec(tmp_path, "f1"), "--set", f"checkpoint.dir={ck}", "--wait")
    assert cli.status(first)["state"] == "COMPLETED"
    saved = sorted(p.name for p in ck.iterdir())
    assert len(saved) >= 2, saved
    done = cli.run("submit", str(spec(tmp_path, "f1")), "--set", f"checkpoint.dir={ck}", "--set", "nodes=1",
                   "--wait", check=False)
    second = done.stdout.split("job ", 1)[1].split()[0]
    assert cli.status(second)["state"] == "FAILED", done.stdout
    assert sorted(p.name for p in ck.iterdir()) == saved
    errors = cli.run("logs", second, "--errors", "--no-color", check=False).stdout
    assert "shared with another run" in errors
