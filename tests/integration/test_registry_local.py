"""Registries and names under concurrency, on the local backend with real processes (the real CLI).

- Two registries (two DDPCTL_HOMEs) sharing one run_dir: local job numbers are per registry, so the second
  one's `local-1` is taken; it takes a fresh number instead of failing, and a failed submit uses none up.
- Simultaneous submits of one name: the duplicate check and the submission are one step per name (a lock in
  the registry), so exactly one of them runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from clitools import REPO, Cli, write_spec

pytestmark = pytest.mark.torchrun


def spec(tmp_path: Path, seconds: float) -> Path:
    script = tmp_path / "quick.py"
    script.write_text(f"from ddpctl import runtime  # (no stop warning)\nimport time\ntime.sleep({seconds})\n")
    return write_spec(
        tmp_path / "quick.yaml", name="quick", script=str(script), run_dir=str(tmp_path / "runs"), backend="local"
    )


def test_two_registries_sharing_a_run_dir_do_not_collide(tmp_path: Path) -> None:
    path = spec(tmp_path, 0)
    first, second = Cli(tmp_path / "home-a"), Cli(tmp_path / "home-b")
    job_a, dir_a = first.submit(path)
    # A failed submit (the snapshot refuses the script's directory) uses up no job number.
    failed = Cli(tmp_path / "home-b", extra_env={"DDPCTL_SNAPSHOT_MAX_FILES": "0"}).run(
        "submit", str(path), check=False
    )
    assert failed.returncode != 0, failed.stdout
    assert not (tmp_path / "home-b" / "local-counter").exists() or (
        tmp_path / "home-b" / "local-counter"
    ).read_text() in ("", "0")
    job_b, dir_b = second.submit(path)
    assert (job_a, job_b) == ("local-1", "local-2"), (job_a, job_b)
    assert dir_a != dir_b and dir_b.name == "local-2"
    assert first.wait_terminal(job_a)["state"] == "COMPLETED"
    assert second.wait_terminal(job_b)["state"] == "COMPLETED"
    assert [p.name for p in (tmp_path / "runs" / "quick").iterdir() if p.name.startswith(".staging")] == []
    # Each registry knows its own job only.
    assert "local-1" in first.run("list").stdout and "local-1" not in second.run("list").stdout


def test_a_taken_run_dir_is_named_in_the_error(tmp_path: Path) -> None:
    from ddpctl.run.rundir import RunDirTaken, commit, staging
    from ddpctl.spec import load_spec

    loaded = load_spec(spec(tmp_path, 0))
    (loaded.run_base / "7").mkdir(parents=True)
    (loaded.run_base / "7" / "theirs").write_text("x")
    with staging(loaded, None) as stage, pytest.raises(RunDirTaken) as caught:
        commit(stage, loaded, "7")
    assert str(caught.value).startswith(f"run dir {loaded.run_base / '7'} already exists"), caught.value
    assert isinstance(caught.value, OSError)
    assert sorted(p.name for p in loaded.run_base.iterdir()) == ["7"]  # nothing half-written left behind


def test_simultaneous_submits_of_one_name_run_only_one(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    path = spec(tmp_path, 30)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ddpctl", "submit", str(path)],
            cwd=REPO,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    done = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    try:
        ran = [out for code, out, _ in done if code == 0]
        refused = [err for code, _, err in done if code != 0]
        assert len(ran) == 1 and len(refused) == 2, done
        job_id = ran[0].split("job ", 1)[1].split()[0]
        for err in refused:
            assert f"name 'quick': job {job_id} of that name is still RUNNING" in err, err
        assert len(cli.run("list", "--json").stdout.strip().splitlines()) >= 1
    finally:
        for line in cli.run("list", "--json").stdout.splitlines():
            if '"RUNNING"' in line:
                cli.run("cancel", line.split('"job_id": "', 1)[1].split('"', 1)[0], check=False)
