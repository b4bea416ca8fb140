"""A local run whose supervisor died before any decision: `status` says why, from the supervisor's own output
(issue 45: an interpreter that could not import ddpctl left only "killed?" and the cause in slurm.out)."""

from __future__ import annotations

from pathlib import Path

from ddpctl.backends.local import BACKEND
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord

TRACEBACK = """Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/x/ddpctl/__main__.py", line 1, in <module>
    from ddpctl.cli import main
ImportError: cannot import name '__version__' from 'ddpctl' (unknown location)

"""


def state_of(run_dir: Path) -> tuple[str, str]:
    state = BACKEND.state(JobRecord("local-1", "x", str(run_dir), "local", 0.0))
    return state.state, state.reason or ""


def test_the_supervisors_last_words_are_the_reason(tmp_path: Path) -> None:
    RunLayout(tmp_path).batch_log.write_text(TRACEBACK)
    state, reason = state_of(tmp_path)
    assert state == "FAILED"
    assert "ImportError: cannot import name '__version__' from 'ddpctl'" in reason, reason
    assert str(RunLayout(tmp_path).batch_log) in reason


def test_no_output_still_says_killed(tmp_path: Path) -> None:
    assert state_of(tmp_path) == (
        "FAILED",
        "its supervisor ended without a decision (killed?); its nodes were stopped with it",
    )


def test_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("TOKEN=hunter2\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    RunLayout(run_dir).batch_log.symlink_to(secret)
    assert "hunter2" not in state_of(run_dir)[1]
