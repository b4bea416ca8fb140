"""What `status` says about stop requests and restarts: literal tables over the pure interpretation."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from ddpctl.node.ackwatch import overdue
from ddpctl.node.ownckpt import OwnCheckpoints
from ddpctl.run import history
from ddpctl.run.history import AttemptStarted, Decided, Hung, Resumed, ResumePoint, ScratchRestart, Signalled
from ddpctl.run.layout import RunLayout
from ddpctl.run.stoptruth import AttemptFacts, launchers_up, read_facts, report, restart_note, summary
from ddpctl.spec import spec_from_mapping

SIGNAL = Signalled(attempt=0, kind="preemption", t=1000.0)
RUNTIME_STOP = {"step": 7, "checkpoint": "/ck/step-000000007", "source": "file:/x"}
SCRIPT_STOP = {"step": None, "checkpoint": "/ck/checkpoint.pt", "source": "script", "signal_time": 1000.0}


@pytest.mark.parametrize(
    ("facts", "now", "state", "says"),
    [
        (AttemptFacts(0), 2000.0, None, None),
        (AttemptFacts(0, SIGNAL, RUNTIME_STOP), 1001.0, "acknowledged", "all ranks stopped at step 7"),
        (
            AttemptFacts(0, SIGNAL, {**SCRIPT_STOP, "checkpoint_mtime": 1000.5}),
            1001.0,
            "acknowledged",
            "saved its own checkpoint /ck/checkpoint.pt 0.5 s after the stop request and exited cleanly (nothing lost)",
        ),
        (
            AttemptFacts(0, SIGNAL, {**SCRIPT_STOP, "checkpoint_mtime": 990.0}),
            1001.0,
            "acknowledged",
            "10.0 s before the stop request and exited cleanly (the steps of the 10.0 s before the request are lost)",
        ),
        # The kernel stamps mtimes from its coarse clock: 10 ms "before" the request is the same moment.
        (
            AttemptFacts(0, SIGNAL, {**SCRIPT_STOP, "checkpoint_mtime": 999.99}),
            1001.0,
            "acknowledged",
            "checkpoint.pt at the stop request and exited cleanly (nothing lost)",
        ),
        (
            AttemptFacts(0, SIGNAL, {**SCRIPT_STOP, "checkpoint_mtime": 999.9}),
            1001.0,
            "acknowledged",
            "0.1 s before the stop request and exited cleanly (the steps of the 0.1 s before the request are lost)",
        ),
        (AttemptFacts(0, SIGNAL), 1010.0, "waiting", "so far no rank has announced that it listens"),
        (AttemptFacts(0, SIGNAL, listeners=("rank 0: x",)), 1010.0, "waiting", "waiting for the ranks (lead"),
        (AttemptFacts(0, SIGNAL), 1060.0, "unacknowledged", "no rank listens for stops"),
        (AttemptFacts(0, SIGNAL, ended=True), 1001.0, "unacknowledged", "work since its own last checkpoint is lost"),
        (AttemptFacts(0, SIGNAL, listeners=("rank 0: x",)), 1060.0, "unacknowledged", "1 rank(s) listen but none"),
        # The time limit came 11 minutes after a recorded hang: nothing "kept training".
        (
            AttemptFacts(0, SIGNAL, ended=True, failed=Hung(attempt=0, t=340.0)),
            1100.0,
            "after_failure",
            "attempt 0: preemption stop arrived 660 s after the attempt had already failed (hang recorded): nothing"
            " was training any more",
        ),
        # A hang recorded after the request changes nothing about the stop's report.
        (
            AttemptFacts(0, SIGNAL, ended=True, failed=Hung(attempt=0, t=1030.0)),
            1100.0,
            "unacknowledged",
            "no rank listens",
        ),
    ],
)
def test_stop_report(facts: AttemptFacts, now: float, state: str | None, says: str | None) -> None:
    got = report(facts, lead_s=60, now=now)
    if state is None:
        assert got is None
        return
    assert got is not None and got.state == state and says is not None and says in got.text, got


START = AttemptStarted(attempt=1)


@pytest.mark.parametrize(
    ("facts", "previous", "note"),
    [
        (AttemptFacts(0, start=START), None, None),
        (AttemptFacts(1), None, None),  # not started yet
        (AttemptFacts(1, start=START, resume=Resumed(attempt=1, step=7)), None, "attempt 1: resumed from step 7"),
        (
            AttemptFacts(1, start=START, resume=Resumed(attempt=1, step=None)),
            None,
            "attempt 1: restarted from scratch (no complete checkpoint to resume from)",
        ),
        (
            AttemptFacts(1, start=replace(START, checkpoints_present=False), ended=True),
            None,
            "attempt 1: no checkpoint in checkpoint.dir (DDPCTL_CKPT_DIR); the script's own resume is unknown",
        ),
        (
            AttemptFacts(1, start=replace(START, checkpoints_present=True)),
            AttemptFacts(0, SIGNAL, SCRIPT_STOP),
            "attempt 1: restarted; the script's own checkpoint /ck/checkpoint.pt was there to resume from",
        ),
        (AttemptFacts(1, start=replace(START, checkpoints_present=True)), None, None),  # runtime may still report
        (
            AttemptFacts(1, start=replace(START, checkpoints_present=True), ended=True),
            None,
            "attempt 1: restarted; the script does not report resuming (ddpctl cannot tell whether it loaded a "
            "checkpoint)",
        ),
    ],
)
def test_restart_note(facts: AttemptFacts, previous: AttemptFacts | None, note: str | None) -> None:
    assert restart_note(facts, previous) == note


@pytest.mark.parametrize(
    ("requested", "now", "acked", "expected"),
    [
        (None, 500.0, False, False),
        (100.0, 159.0, False, False),
        (100.0, 160.0, False, True),
        (100.0, 999.0, True, False),
    ],
)
def test_overdue(requested: float | None, now: float, acked: bool, expected: bool) -> None:
    assert overdue(requested, 60, now, acked) is expected


def test_read_facts_from_a_run_directory(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    for attempt in (0, 1):
        layout.attempt_dir(attempt).mkdir()
    history.append(layout.events, AttemptStarted(attempt=0, checkpoints_present=False))
    history.append(layout.events, Signalled(attempt=0, kind="preemption"))
    history.append(layout.events, AttemptStarted(attempt=1, checkpoints_present=False))
    layout.listen_marker(1, 3).write_text(json.dumps({"rank": 3, "how": "ddpctl.runtime.StopAgreement"}))
    history.append(layout.events, Resumed(attempt=1, step=None))
    facts = read_facts(layout)
    assert [(f.attempt, f.ended, f.signal is not None, f.listeners) for f in facts] == [
        (0, True, True, ()),
        (1, False, False, ("rank 3: ddpctl.runtime.StopAgreement",)),
    ]
    stops, notes = summary(layout, lead_s=60, now=0.0)
    assert [s.state for s in stops] == ["unacknowledged"]
    assert notes == ["attempt 1: restarted from scratch (no complete checkpoint to resume from)"]


def test_a_stop_after_a_recorded_hang_says_the_attempt_had_failed(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    history.append(layout.events, AttemptStarted(attempt=0))
    history.append(layout.events, Hung(attempt=0, idle_s=300))
    history.append(layout.events, Signalled(attempt=0, kind="timeout"))
    history.append(layout.events, Decided(attempt=0, action="finish", kind="node_failure"))
    stops, _ = summary(layout, lead_s=60, now=10**10)
    assert [s.state for s in stops] == ["after_failure"]
    assert "had already failed (hang recorded)" in stops[0].text and "kept training" not in stops[0].text


def test_launchers_up_needs_every_node_of_the_newest_attempt(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    layout.spec_file.write_text("name: x\nscript: train.py\nnodes: 2\n")
    assert not launchers_up(layout)  # no attempt yet
    for attempt, rank in ((0, 0), (0, 1), (1, 1)):
        info = layout.node_info(attempt, rank)
        info.parent.mkdir(parents=True, exist_ok=True)
        assert not launchers_up(layout)  # before each one is written: some node of the newest attempt is missing
        info.write_text("{}")
    layout.node_info(1, 0).write_text("{}")
    assert launchers_up(layout)


# Issue 42: a script with its own checkpoints of a known kind (resume preset or checkpoint.pattern).
STARTED = AttemptStarted(attempt=1, checkpoints_present=True)
POINT = ResumePoint(attempt=1, checkpoint="/c/checkpoint-300", step=300, args=("--resume_from_checkpoint", "/c/x"))


@pytest.mark.parametrize(
    ("facts", "note"),
    [
        (AttemptFacts(1, start=STARTED, point=POINT),
         "attempt 1: resumed from step 300 (/c/checkpoint-300), given --resume_from_checkpoint /c/x"),
        (AttemptFacts(1, start=STARTED, point=ResumePoint(attempt=1, checkpoint="/c/ckpt.pt",
                                                          args=("--init_from=resume",))),
         "attempt 1: resumed from /c/ckpt.pt, given --init_from=resume"),
        (AttemptFacts(1, start=STARTED, point=ResumePoint(attempt=1, checkpoint="/c/snapshot.pt")),
         "attempt 1: /c/snapshot.pt was there; the script loads it by itself (ddpctl cannot tell whether it did)"),
        (AttemptFacts(1, start=STARTED, point=ResumePoint(attempt=1)),
         "attempt 1: no complete checkpoint of the script's kind in checkpoint.dir: it started from scratch"),
        (AttemptFacts(1, start=STARTED, point=POINT, scratch=ScratchRestart(
            attempt=1, step=300, checkpoint="/c/checkpoint-300", wrote="checkpoint-100", wrote_step=100)),
         "attempt 1: WARNING: restarted from scratch although step 300 existed (/c/checkpoint-300): it wrote "
         "checkpoint-100 (step 100) after its start"),
        # The first attempt: silent unless a checkpoint was already there (another run's, in a shared directory).
        (AttemptFacts(0, point=ResumePoint(attempt=0)), None),
        (AttemptFacts(0, point=ResumePoint(attempt=0, checkpoint="/c/snapshot.pt")),
         "attempt 0: /c/snapshot.pt was there; the script loads it by itself (ddpctl cannot tell whether it did)"),
    ],
)  # fmt: skip
def test_restart_note_of_a_script_with_its_own_checkpoints(facts: AttemptFacts, note: str | None) -> None:
    assert restart_note(facts, None) == note


def test_an_attempt_that_saves_below_the_step_it_could_resume_from_is_reported(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    spec = spec_from_mapping(
        {"name": "r", "script": str(tmp_path / "t.py"), "checkpoint": {"pattern": "step-{step}.pt"}}, "x.yaml"
    )
    layout = RunLayout(tmp_path / "run")
    ckpt = layout.default_checkpoints
    ckpt.mkdir(parents=True)
    (ckpt / "step-300.pt").write_bytes(b"saved")
    os.utime(ckpt / "step-300.pt", (1000.0, 1000.0))
    own = OwnCheckpoints.at_start(spec, layout)
    own.record_start(layout, 1)
    assert own.check_end(layout, 1) == []  # nothing written yet
    (ckpt / "step-100.pt").write_bytes(b"saved again, from scratch")
    [warning] = own.check_end(layout, 1)
    assert warning == (
        f"attempt 1: WARNING: restarted from scratch although step 300 existed ({ckpt / 'step-300.pt'}): it wrote "
        "step-100.pt (step 100) after its start"
    )
    history.append(layout.events, AttemptStarted(attempt=1))
    _, notes = summary(layout, 60, 2000.0)
    assert notes == [warning]


def test_a_rotation_that_deletes_an_earlier_attempts_newer_checkpoint_is_reported(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    spec = spec_from_mapping({"name": "r", "script": str(tmp_path / "t.py"), "resume": {"preset": "hf-trainer"}}, "x")
    layout = RunLayout(tmp_path / "run")
    ckpt = layout.default_checkpoints
    for step in (200, 300):  # the earlier attempt's, complete (trainer_state.json is written last)
        (ckpt / f"checkpoint-{step}").mkdir(parents=True)
        (ckpt / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
        os.utime(ckpt / f"checkpoint-{step}" / "trainer_state.json", (1000.0, 1000.0))
    own = OwnCheckpoints.at_start(spec, layout)
    (ckpt / "checkpoint-400").mkdir()  # resumed, then saved further: its rotation deletes the oldest (fine)
    (ckpt / "checkpoint-400" / "trainer_state.json").write_text("{}")
    (ckpt / "checkpoint-200" / "trainer_state.json").unlink()
    (ckpt / "checkpoint-200").rmdir()
    assert own.check_end(layout, 1) == []
    (ckpt / "checkpoint-400" / "trainer_state.json").unlink()
    (ckpt / "checkpoint-400").rmdir()
    (ckpt / "checkpoint-100").mkdir()  # from scratch instead, save_total_limit=1: step 300 is deleted
    (ckpt / "checkpoint-100" / "trainer_state.json").write_text("{}")
    (ckpt / "checkpoint-300" / "trainer_state.json").unlink()
    (ckpt / "checkpoint-300").rmdir()
    lines = own.check_end(layout, 1)
    rotated = (
        "attempt 1: WARNING: the script's checkpoint rotation deleted checkpoint-300 (step 300, an earlier "
        "attempt's) while its own newest is checkpoint-100 (step 100)"
    )
    assert lines[-1] == rotated, lines
    assert json.loads(layout.events.read_text().splitlines()[-1])["event"] == "checkpoint-rotated"
    history.append(layout.events, AttemptStarted(attempt=1))
    _, notes = summary(layout, 60, 2000.0)
    assert notes[-1] == rotated, notes  # status shows it
