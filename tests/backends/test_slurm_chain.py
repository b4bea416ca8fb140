"""A chained run's current job, state and cancel (ddpctl.backends.slurm.chain), with Slurm answered by a
scripted Runner at our own seam."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ddpctl.backends.slurm.chain import cancel_run, chain_state, current_job
from ddpctl.proc import Completed
from ddpctl.run import history
from ddpctl.run.history import AttemptStarted, ChainSubmitted, Decided, Signalled
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord


class Slurm:
    """squeue answers from `queue` (job id -> state); scancel is recorded and removes the job."""

    def __init__(self, queue: dict[str, str]) -> None:
        self.queue, self.cancelled = dict(queue), list[str]()

    def __call__(self, argv: Sequence[str]) -> Completed:
        if argv[0] == "squeue":
            job = argv[argv.index("-j") + 1]
            if job not in self.queue:
                return Completed(tuple(argv), 1, "", "slurm_load_jobs error: Invalid job id specified")
            return Completed(tuple(argv), 0, f"{job}|{self.queue[job]}|None|node[1-2]|0:05\n", "")
        if argv[0] == "scancel":
            self.cancelled.append(argv[-1])
            self.queue.pop(argv[-1], None)
        return Completed(tuple(argv), 0 if argv[0] == "scancel" else 1, "", "")


def chained_run(tmp_path: Path) -> JobRecord:
    layout = RunLayout(tmp_path)
    history.append(layout.events, AttemptStarted(attempt=0, job_id="10"))
    history.append(layout.events, Signalled(attempt=0, kind="preemption"))
    history.append(layout.events, ChainSubmitted(attempt=0, job_id="11", predecessor="10", next_attempt=1))
    return JobRecord("10", "example", str(tmp_path), "sbatch", 0.0)


def test_the_predecessor_is_current_while_it_checkpoints(tmp_path: Path) -> None:
    record, slurm = chained_run(tmp_path), Slurm({"10": "RUNNING", "11": "PENDING"})
    assert current_job(record, slurm) == "10"
    state = chain_state(record, slurm)
    assert (state.state, state.reason) == ("RUNNING", "job 10, 1 of 2 in the chain")


def test_a_pending_successor_is_a_requeued_run(tmp_path: Path) -> None:
    record = chained_run(tmp_path)
    history.append(
        RunLayout(tmp_path).events,
        Decided(attempt=0, action="requeue", kind="preemption", reason="preemption: requeue 1 of 10", exit_code=0),
    )
    slurm = Slurm({"11": "PENDING"})
    assert current_job(record, slurm) == "11"
    state = chain_state(record, slurm)
    assert (state.state, state.restarts, state.reason) == ("REQUEUED", 1, "job 11, 2 of 2 in the chain")


def test_a_predecessor_held_completing_by_a_lost_node_is_not_the_current_job(tmp_path: Path) -> None:
    """Slurm keeps a job that lost a node COMPLETING for up to SlurmdTimeout while its successor trains: `status`
    said RUNNING in job 10, 1 of 2, for those minutes."""
    record = chained_run(tmp_path)
    slurm = Slurm({"10": "COMPLETING", "11": "RUNNING"})
    assert current_job(record, slurm) == "11"
    state = chain_state(record, slurm)
    assert (state.state, state.reason) == ("RUNNING", "job 11, 2 of 2 in the chain")


def test_cancel_ends_every_job_of_the_run(tmp_path: Path) -> None:
    record, slurm = chained_run(tmp_path), Slurm({"10": "RUNNING", "11": "PENDING"})
    assert cancel_run(record, slurm) == ["10", "11"]
    assert slurm.cancelled == ["10", "11"] and RunLayout(tmp_path).cancel_request.exists()
    assert chain_state(record, slurm).state == "CANCELLED"


def test_a_single_job_run_is_unchanged(tmp_path: Path) -> None:
    record, slurm = JobRecord("7", "x", str(tmp_path), "sbatch", 0.0), Slurm({"7": "RUNNING"})
    assert current_job(record, slurm) == "7"
    assert chain_state(record, slurm).state == "RUNNING" and chain_state(record, slurm).reason == ""


class Leaving(Slurm):
    """Job 10 leaves the queue right after squeue first lists it; scontrol then shows it COMPLETED, as Slurm
    does for a predecessor whose batch script exited 0 after submitting its successor."""

    def __call__(self, argv: Sequence[str]) -> Completed:
        if argv[0] == "scontrol" and argv[-1] == "10":
            return Completed(tuple(argv), 0, "JobId=10 JobName=example JobState=COMPLETED ExitCode=0:0\n", "")
        done = super().__call__(argv)
        if argv[0] == "squeue" and "10" in argv:
            self.queue.pop("10", None)
        return done


def test_a_predecessor_leaving_the_queue_between_two_questions_does_not_end_the_run(tmp_path: Path) -> None:
    # `logs -f` ended a chained run as COMPLETED, with its last attempt never shown, when the predecessor left
    # the queue after `current_job` saw it running and before its own state was asked.
    record = chained_run(tmp_path)
    history.append(RunLayout(tmp_path).events, Decided(attempt=0, action="requeue", kind="preemption", exit_code=0))
    state = chain_state(record, Leaving({"10": "RUNNING", "11": "PENDING"}))
    assert (state.state, state.restarts, state.reason) == ("REQUEUED", 1, "job 11, 2 of 2 in the chain"), state


def test_a_state_poll_reads_the_runs_log_once(tmp_path: Path) -> None:
    """`logs -f` asks every 2 s: one read of the log per poll while the job is queued or running (ddpctl 0.2 read
    it 4 times for a chain, twice for one job); after the job leaves the queue, one more read for its decision."""
    record, slurm = chained_run(tmp_path), Slurm({"10": "RUNNING", "11": "PENDING"})
    log = history.log_of(RunLayout(tmp_path).events)
    before = log.reads
    assert chain_state(record, slurm).state == "RUNNING"
    assert log.reads - before == 1
    single = JobRecord("7", "x", str(tmp_path / "one"), "sbatch", 0.0)
    history.append(RunLayout(Path(single.run_dir)).events, AttemptStarted(attempt=0, job_id="7"))
    one = history.log_of(RunLayout(Path(single.run_dir)).events)
    before = one.reads
    assert chain_state(single, Slurm({"7": "RUNNING"})).state == "RUNNING"
    assert one.reads - before == 1
    history.append(RunLayout(Path(single.run_dir)).events, Decided(attempt=0, action="finish", exit_code=0))
    before, bytes_before = one.reads, one.bytes_read
    assert chain_state(single, Slurm({})).state == "COMPLETED"  # gone from the queue: its decision says how
    assert one.reads - before == 2 and one.bytes_read - bytes_before < 200  # the second: only the appended line


def test_the_local_backends_state_reads_the_runs_log_once(tmp_path: Path) -> None:
    from ddpctl.backends.local import BACKEND

    layout = RunLayout(tmp_path)
    history.append(layout.events, Decided(attempt=0, action="finish", exit_code=0, reason="training completed"))
    log = history.log_of(layout.events)
    before = log.reads
    state = BACKEND.state(JobRecord("local-1", "x", str(tmp_path), "local", 0.0))
    assert (state.state, log.reads - before) == ("COMPLETED", 1)
