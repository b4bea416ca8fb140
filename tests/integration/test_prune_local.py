"""`ddpctl prune` through the real CLI (issue 45, item 9): the run dir of a job that ended goes, a live job's
run dir and record are never touched, whatever the age bound, and a registry line naming some other directory
does not get it deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import Cli, write_spec

from ddpctl.run.registry import JobRecord, Registry

pytestmark = pytest.mark.torchrun

SLOW = "import time\nfor i in range(240):\n    print('step', i, flush=True)\n    time.sleep(0.5)\n"
QUICK = "print('done', flush=True)\n"


def spec(tmp_path: Path, name: str, source: str) -> Path:
    (tmp_path / f"{name}.py").write_text(source)
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        script=f"{name}.py",
        nodes=1,
        nproc_per_node=1,
        run_dir=str(tmp_path / "runs"),
        backend="local",
    )


def test_prune_removes_ended_runs_and_never_a_live_one(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "state", cwd=tmp_path)
    ended_id, ended_dir = cli.submit(spec(tmp_path, "quick", QUICK))
    assert cli.wait_terminal(ended_id, timeout=120)["state"] == "COMPLETED"
    live_id, live_dir = cli.submit(spec(tmp_path, "slow", SLOW))
    cli.wait_for(
        lambda: (
            "step 1" in (live_dir / "attempt-0" / "rank-0.log").read_text()
            if (live_dir / "attempt-0" / "rank-0.log").exists()
            else False
        ),
        what="a step",
    )
    # A registry line naming a directory that is no run dir of its job: never deleted.
    bystander = tmp_path / "precious"
    bystander.mkdir()
    (bystander / "job.yaml").write_text("name: x\n")
    Registry.from_env(cli.env).add(JobRecord("local-99", "x", str(bystander), "local", 0.0))
    before = sorted(p.relative_to(live_dir) for p in live_dir.rglob("*"))

    dry = cli.run("prune", "--older-than", "0", "--dry-run").stdout
    assert f"would remove {ended_dir}" in dry and ended_dir.exists(), dry
    done = cli.run("prune", "--older-than", "0").stdout
    assert f"removed {ended_dir}\n" in done and str(live_dir) not in done, done
    assert not ended_dir.exists() and bystander.exists()
    assert live_dir.exists() and set(before) <= {p.relative_to(live_dir) for p in live_dir.rglob("*")}
    assert cli.status(live_id)["state"] == "RUNNING"
    ids = [json.loads(line)["job_id"] for line in cli.run("list", "--json", "--no-state").stdout.splitlines()]
    assert live_id in ids and ended_id not in ids, ids
    cli.run("cancel", live_id)
    assert cli.run("prune", "--older-than", "0").stdout.startswith(f"removed {live_dir}\n")  # ended now
