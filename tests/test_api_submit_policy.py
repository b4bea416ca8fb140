"""`ddpctl.submit()` goes through the same submit policy as `ddpctl submit`: a live job of the same name refuses
it with the CLI's line, and the script's stop-handling warning reaches Python (the CLI prints it as one line).

No scheduler and no job is started: a held supervisor lock is what a live local job looks like, and the warning
is checked with the submission itself replaced."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any

import pytest
from clitools import Cli, write_spec

import ddpctl
from ddpctl import api
from ddpctl.backends.names import DuplicateName
from ddpctl.cli import submit as cli_submit
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord, Registry

JOB: Any = object()  # what the replaced submission returns
REFUSED = (
    "name 'twice': job local-7 of that name is still RUNNING; wait for it, cancel it (ddpctl cancel local-7), "
    "choose another name (--set name=...), or submit anyway with --allow-duplicate"
)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def spec_file(tmp_path: Path, source: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text(source)
    return write_spec(
        tmp_path / "twice.yaml", name="twice", script=str(script), run_dir=str(tmp_path / "runs"), backend="local"
    )


def test_submit_refuses_a_live_duplicate_name_with_the_clis_line(tmp_path: Path, home: Path) -> None:
    path = spec_file(tmp_path, "from ddpctl import runtime\n")
    run_dir = tmp_path / "runs" / "twice" / "local-7"
    lock = RunLayout(run_dir).supervisor_lock
    lock.parent.mkdir(parents=True)
    record = JobRecord(job_id="local-7", name="twice", run_dir=str(run_dir), backend="local", submitted_at=0.0)
    Registry.from_env().add(record)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # what a live supervisor holds: the local job is RUNNING
        with pytest.raises(DuplicateName) as caught:
            ddpctl.submit(path)
        cli = Cli(home).run("submit", str(path), check=False)
    assert str(caught.value) == REFUSED
    assert (cli.returncode, cli.stdout) == (caught.value.exit_code, "")
    assert cli.stderr == f"ddpctl: error: {REFUSED}\n"
    assert [r.job_id for r in Registry.from_env().records()] == ["local-7"]  # nothing was submitted


def submitted_stub(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Replaces the submission itself: the policy before it runs as it would."""
    plans: list[Any] = []

    def submit_plan(plan: Any) -> Any:
        plans.append(plan)
        return JOB

    monkeypatch.setattr(api, "submit_plan", submit_plan)
    return plans


def test_submit_hands_the_stop_warning_to_python_and_the_cli_prints_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = spec_file(tmp_path, "print('trains, never listens for a stop')\n")
    plans = submitted_stub(monkeypatch)
    said: list[str] = []
    assert ddpctl.submit(path, warn=said.append) is JOB
    assert len(said) == 1 and said[0].startswith(f"{tmp_path / 'train.py'}: shows no sign of handling stops")
    with pytest.warns(UserWarning) as caught:
        ddpctl.submit(path)
    assert [str(w.message) for w in caught] == said
    assert caught[0].filename == __file__  # shown at the caller's line
    capsys.readouterr()
    cli_submit.submit(api.spec_of(path), allow_duplicate=False)
    assert capsys.readouterr().err == f"ddpctl: warning: {said[0]}\n"
    assert len(plans) == 3


def test_a_script_that_handles_stops_gets_no_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = spec_file(tmp_path, "from ddpctl import runtime\n")
    submitted_stub(monkeypatch)
    said: list[str] = []
    assert ddpctl.submit(path, warn=said.append) is JOB
    assert said == []
