"""Parsers of sbatch/squeue/scontrol output, and state derivation through an injected runner (our seam)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ddpctl.backends.slurm.state import state_from_slurm
from ddpctl.errors import CommandError
from ddpctl.proc import Completed
from ddpctl.run import history
from ddpctl.run.history import AttemptStarted, Decided
from ddpctl.run.registry import JobRecord
from ddpctl.slurm.commands import parse_job_id, parse_scontrol_job, parse_squeue


@pytest.mark.parametrize(("text", "job_id"), [("123\n", "123"), ("456;cluster1\n", "456"), ("77_3\n", "77_3")])
def test_parse_job_id(text: str, job_id: str) -> None:
    assert parse_job_id(text) == job_id


@pytest.mark.parametrize("text", ["", "Submitted batch job\n", "abc;x"])
def test_parse_job_id_rejects(text: str) -> None:
    with pytest.raises(CommandError, match="no job id"):
        parse_job_id(text)


def test_parse_squeue_rows() -> None:
    rows = parse_squeue("12|RUNNING|None|node[1-2]|0:05\n13|PENDING|BeginTime||0:00\ngarbage\n")
    assert [(r.job_id, r.state, r.reason, r.nodes) for r in rows] == [
        ("12", "RUNNING", "None", "node[1-2]"),
        ("13", "PENDING", "BeginTime", ""),
    ]


def test_parse_scontrol_job() -> None:
    line = "JobId=12 JobName=x UserId=root(0) JobState=COMPLETED Reason=None Restarts=2 ExitCode=0:0 NodeList=node[1-2]"
    fields = parse_scontrol_job(line)
    assert fields["JobState"] == "COMPLETED" and fields["Restarts"] == "2" and fields["NodeList"] == "node[1-2]"


class Answers:
    """A runner answering by program name: the injected seam standing in for squeue/scontrol."""

    def __init__(self, **answers: tuple[int, str]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(tuple(argv))
        code, out = self.answers.get(argv[0], (1, ""))
        return Completed(tuple(argv), code, out, "")


def record(tmp_path: Path) -> JobRecord:
    return JobRecord(job_id="12", name="x", run_dir=str(tmp_path), backend="sbatch", submitted_at=0.0)


def test_pending_after_requeue_is_requeued_not_failed(tmp_path: Path) -> None:
    history.append(tmp_path / "events.jsonl", AttemptStarted(attempt=0))
    history.append(tmp_path / "events.jsonl", AttemptStarted(attempt=1))
    state = state_from_slurm(record(tmp_path), Answers(squeue=(0, "12|PENDING|BeginTime||0:00\n")))
    assert (state.state, state.restarts, state.reason, state.terminal) == ("REQUEUED", 1, "BeginTime", False)


def test_requeue_hold_before_the_next_attempt_starts_is_requeued(tmp_path: Path) -> None:
    history.append(tmp_path / "events.jsonl", AttemptStarted(attempt=0))
    history.append(tmp_path / "events.jsonl", Decided(attempt=0, action="requeue", kind="preemption"))
    state = state_from_slurm(record(tmp_path), Answers(squeue=(0, "12|PENDING|BeginTime||0:00\n")))
    assert (state.state, state.restarts) == ("REQUEUED", 1)


def test_finished_job_uses_the_recorded_decision(tmp_path: Path) -> None:
    history.append(
        tmp_path / "events.jsonl",
        Decided(attempt=0, action="finish", kind="preemption", reason="preemption budget spent", exit_code=76),
    )
    runner = Answers(squeue=(0, ""), scontrol=(0, "JobId=12 JobState=FAILED ExitCode=76:0"))
    state = state_from_slurm(record(tmp_path), runner)
    assert (state.state, state.exit_code, state.terminal) == ("BUDGET_SPENT", 76, True)
    assert "budget" in state.reason


def test_cancelled_comes_from_scontrol(tmp_path: Path) -> None:
    runner = Answers(squeue=(0, ""), scontrol=(0, "JobId=12 JobState=CANCELLED Reason=None ExitCode=0:15"))
    state = state_from_slurm(record(tmp_path), runner)
    assert (state.state, state.terminal) == ("CANCELLED", True)


def test_forgotten_job_without_events_is_unknown(tmp_path: Path) -> None:
    state = state_from_slurm(record(tmp_path), Answers())
    assert state.state == "UNKNOWN" and not state.terminal


def test_preempt_that_cannot_be_delivered_leaves_no_request(tmp_path: Path) -> None:
    import yaml

    from ddpctl.backends.slurm.jobs import SlurmJobs
    from ddpctl.spec import JobSpec, spec_to_mapping

    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(JobSpec(name="x", script="t.py"))))
    runner = Answers(scancel=(1, ""))  # e.g. "Job can not be altered now" for a pending job
    with pytest.raises(CommandError):
        SlurmJobs(runner).preempt(record(tmp_path), "timeout")
    assert not (tmp_path / "preempt-request.json").exists()
    assert runner.calls[-1][:1] == ("scancel",) and "--signal=USR2" in runner.calls[-1]
