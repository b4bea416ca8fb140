"""A Slurm controller that does not answer: bounded queries that say so, and a submit whose sbatch failed
ambiguously resolved before it returns. Literal tables over our own Runner seam; the real outage (a stopped
slurmctld) is in tests/integration/test_controller_outage.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ddpctl.backends.slurm import submit as sbatch_submit
from ddpctl.backends.slurm.jobs import SlurmJobs
from ddpctl.backends.slurm.state import without_controller
from ddpctl.errors import CommandError, CommandTimeout, ControllerUnreachable
from ddpctl.proc import Completed
from ddpctl.run import history
from ddpctl.run.history import AttemptStarted, Decided, RunHistory, Submitted
from ddpctl.run.registry import JobRecord
from ddpctl.slurm import commands

SOCKET = "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
NO_CONTACT = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


class Scripted:
    """Answers each command from a list of outcomes for it, in order (the last one repeats)."""

    def __init__(self, **outcomes: Sequence[Completed | Exception]) -> None:
        self.outcomes = {name: list(queue) for name, queue in outcomes.items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(tuple(argv))
        queue = self.outcomes[argv[0]]
        outcome = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def done(rc: int, out: str = "", err: str = "") -> Completed:
    return Completed((), rc, out, err)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / ".staging-abc" / "job.sbatch"
    path.parent.mkdir()
    path.write_text("#!/bin/bash\n")
    return path


@pytest.mark.parametrize(
    ("sbatch", "squeue", "outcome"),
    [
        # A clean answer, either way, is final: no squeue asked.
        ([done(0, "77\n")], [done(0)], "77"),
        ([done(1, err="sbatch: error: invalid partition specified: gpu")], [done(0)], "invalid partition"),
        # Sent, no answer: the job the controller created is found by its script's path and adopted.
        ([done(1, err=SOCKET)], [done(1, err=NO_CONTACT), done(0, "91|{script} .staging-abc\n")], "91"),
        (
            [CommandTimeout("sbatch did not answer within 60 s")],
            [done(0, "12|/elsewhere/job.sbatch .staging-xyz\n92|{script} .staging-abc\n")],
            "92",
        ),
        # The controller answers twice without it: not submitted.
        ([done(1, err=SOCKET)], [done(0, "12|{script}x .staging-abcx\n")], "answers again and has no such job"),
        # Silent to the end: withdrawn, said as unknown.
        ([done(1, err=SOCKET)], [done(1, err=NO_CONTACT)], "whether it created the job is unknown"),
    ],
)
def test_an_ambiguous_sbatch_is_resolved_before_submit_returns(
    script: Path,
    sbatch: list[Completed | Exception],
    squeue: list[Completed],
    outcome: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DDPCTL_SUBMIT_RESOLVE_S", "30")
    answers = [done(a.returncode, a.stdout.replace("{script}", str(script)), a.stderr) for a in squeue]
    slurm, clock = Scripted(sbatch=sbatch, squeue=answers), Clock()
    try:
        got = sbatch_submit.submit(script, "example", slurm, slurm, clock=clock, sleep=clock.sleep)
    except CommandError as err:
        got = str(err)
    assert outcome in got
    # The submission carries its tag: the staging dir's name is the script's argument.
    assert slurm.calls[0] == ("sbatch", "--parsable", str(script), ".staging-abc")
    asked = [c for c in slurm.calls if c[0] == "squeue"]
    assert all(c == ("squeue", "-h", "--me", "-n", "example", "-o", "%i|%o") for c in asked)
    assert clock.t <= 30 + sbatch_submit.POLL_S


def test_a_silent_controller_is_asked_once_per_command_not_once_per_query() -> None:
    slurm = Scripted(squeue=[done(1, err=NO_CONTACT)], scontrol=[done(0)])
    outage = commands.Outage()
    times = iter([100.0, 101.0, 125.0, 126.0])
    with pytest.raises(ControllerUnreachable, match="Unable to contact"):
        outage.ask(["squeue"], slurm, now=lambda: next(times))
    with pytest.raises(ControllerUnreachable):
        outage.ask(["scontrol"], slurm, now=lambda: next(times))  # within REMEMBER_S: not asked
    assert [c[0] for c in slurm.calls] == ["squeue"]
    assert outage.since == 100.0
    # Later it asks again; an answer ends the outage.
    assert outage.ask(["scontrol"], slurm, now=lambda: next(times)).returncode == 0
    assert outage.since is None
    # Another runner (another cluster, a test's own seam) is not silenced by this one's outage.
    other = Scripted(squeue=[done(0)])
    outage.failed(200.0, "x", slurm)
    assert outage.ask(["squeue"], other, now=lambda: 201.0).returncode == 0


def test_a_query_that_times_out_is_an_outage() -> None:
    def hangs(argv: Sequence[str]) -> Completed:
        raise CommandTimeout("squeue did not answer within 8 s: squeue -h")

    with pytest.raises(ControllerUnreachable, match="did not answer within 8 s"):
        commands.Outage().ask(["squeue"], hangs)


@pytest.mark.parametrize(
    ("records", "state", "says"),
    [
        ([], "UNREACHABLE", "from the run dir: no attempt started yet"),
        (
            [Submitted(job_id="5", backend="sbatch", spec="s"), AttemptStarted(attempt=0, t=1.0)],
            "UNREACHABLE",
            "from the run dir: attempt 0 started, no end recorded",
        ),
        # The run dir knows the run ended: that is the state, controller or not.
        (
            [
                AttemptStarted(attempt=0, t=1.0),
                Decided(attempt=0, step_exit=0, stopped=False, action="finish", kind=None, reason="done", exit_code=0),
            ],
            "COMPLETED",
            "done",
        ),
    ],
)
def test_without_the_controller_the_state_is_what_the_run_dir_knows(
    records: list[history.Event], state: str, says: str
) -> None:
    got = without_controller(RunHistory(tuple(records)), "squeue: Socket timed out on send/recv operation")
    assert got.state == state and says in got.reason
    assert not got.terminal or state == "COMPLETED"
    if state == "UNREACHABLE":
        assert got.reason.startswith("Slurm controller not answering since ")


def test_status_of_a_job_while_the_controller_is_silent_is_unreachable(tmp_path: Path) -> None:
    slurm = Scripted(squeue=[done(1, err=NO_CONTACT)], scontrol=[done(1, err=NO_CONTACT)])
    (tmp_path / "7").mkdir()
    history.append(tmp_path / "7" / "events.jsonl", AttemptStarted(attempt=0, t=1.0))
    record = JobRecord("7", "example", str(tmp_path / "7"), "sbatch", 1.0)
    got = SlurmJobs(runner=slurm).state(record)
    assert got.state == "UNREACHABLE" and "attempt 0 started" in got.reason, got
    assert not got.terminal
