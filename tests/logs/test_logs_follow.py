"""`ddpctl logs` on real files: concurrent writer processes, requeues, truncation, vanished files."""

from __future__ import annotations

import io
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_logs_support import (
    FAST,
    MODES,
    FollowThread,
    JobStateSwitch,
    Recorder,
    append,
    expected_lines,
    make_attempt,
    start_writer,
)

from ddpctl.errors import LogsError
from ddpctl.logs.core import LineFilter, parse_rank_spec
from ddpctl.logs.follow import FollowConfig
from ddpctl.logs.notify import Notifier, mount_fs_type
from ddpctl.logs.output import PlainSink
from ddpctl.logs.show import LogsRequest, show_logs
from ddpctl.logs.stamps import FDS
from ddpctl.run import logtimes
from ddpctl.run.registry import JobRecord


def record(run_dir: Path) -> JobRecord:
    return JobRecord("123", "job", str(run_dir), "local", 0.0)


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_writers_every_line_once_whole_and_prefixed(tmp_path: Path, mode: str) -> None:
    ranks, count = 6, 3000
    attempt = make_attempt(tmp_path, 0, {"node1": [0, 1, 2], "node2": [3, 4, 5]})
    out = io.StringIO()
    follower = FollowThread(tmp_path, Recorder(), JobStateSwitch(), config=MODES[mode])
    follower.sink = PlainSink(out)  # type: ignore[assignment]  # the real plain sink, into memory
    follower.start()
    writers = [start_writer(attempt / f"rank-{r}.log", f"t{r}", count, seed=r) for r in range(ranks)]
    assert all(w.wait(60) == 0 for w in writers)
    assert follower.finish() is not None
    lines = out.getvalue().splitlines()
    assert lines[-1] == "-- job 123 COMPLETED --"
    for r in range(ranks):
        node = "node1" if r < 3 else "node2"
        prefix = f"[a0 {node} r{r}] "
        got = [line[len(prefix) :] for line in lines if line.startswith(prefix)]
        assert got == expected_lines(f"t{r}", count, seed=r)
    assert len(lines) == ranks * count + 1


@pytest.mark.parametrize("mode", MODES)
def test_follow_moves_to_new_attempt_and_new_rank_files(tmp_path: Path, mode: str) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0, 1]})
    append(a0 / "rank-0.log", b"a0 r0 first\n")
    sink, states = Recorder(), JobStateSwitch()
    follower = FollowThread(tmp_path, sink, states, config=MODES[mode])
    follower.start()
    sink.wait_for(lambda s: "a0 r0 first" in s.texts())
    append(a0 / "rank-1.log", b"a0 r1 late file\nhalf of a line")  # a new rank file, a partial last line
    sink.wait_for(lambda s: "a0 r1 late file" in s.texts())
    a1 = make_attempt(tmp_path, 1, {"n2": [0, 1]})  # requeued: attempt-1 appears
    append(a1 / "rank-0.log", b"a1 r0 resumed\n")
    sink.wait_for(lambda s: "a1 r0 resumed" in s.texts())
    append(a1 / "rank-1.log", b"a1 r1 resumed\nno newline at the end")
    sink.wait_for(lambda s: "a1 r1 resumed" in s.texts())
    assert "no newline at the end" not in sink.texts()  # held while the job runs
    assert follower.finish("FAILED") is not None
    flat = [text for _, _, text in sink.rows]
    assert flat.index("half of a line") < flat.index("-- attempt 1 --") < flat.index("a1 r0 resumed")
    assert flat[-2:] == ["no newline at the end", "-- job 123 FAILED --"]
    assert sink.texts(attempt=1, rank=0) == ["a1 r0 resumed"]
    assert [s.node for _, s, _ in sink.rows if s is not None and s.attempt == 1] == ["n2"] * 3


def test_follow_waits_for_the_first_attempt(tmp_path: Path) -> None:
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch("PENDING"))
    follower.start()
    time.sleep(0.3)
    a0 = make_attempt(tmp_path, 0, {"n1": [0]})
    append(a0 / "rank-0.log", b"started\n")
    sink.wait_for(lambda s: "started" in s.texts())
    follower.finish()
    assert sink.notes() == ["-- job 123 COMPLETED --"]


@pytest.mark.parametrize("mode", MODES)
def test_truncated_file_is_read_again_from_the_start(tmp_path: Path, mode: str) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0]})
    log = a0 / "rank-0.log"
    append(log, b"old 1\nold 2\nold 3\n")
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch(), config=MODES[mode])
    follower.start()
    sink.wait_for(lambda s: len(s.texts()) == 3)
    log.write_bytes(b"new 1\n")  # truncate and rewrite, shorter than before
    sink.wait_for(lambda s: "new 1" in s.texts())
    append(log, b"new 2\n")
    sink.wait_for(lambda s: "new 2" in s.texts())
    follower.finish()
    assert sink.texts() == ["old 1", "old 2", "old 3", "new 1", "new 2"]


def test_vanished_file_does_not_stop_the_others(tmp_path: Path) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0, 1]})
    append(a0 / "rank-0.log", b"r0 a\n")
    append(a0 / "rank-1.log", b"r1 a\n")
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch())
    follower.start()
    sink.wait_for(lambda s: len(s.texts()) == 2)
    (a0 / "rank-0.log").unlink()
    append(a0 / "rank-1.log", b"r1 b\n")
    sink.wait_for(lambda s: "r1 b" in s.texts())
    append(a0 / "rank-0.log", b"r0 recreated\n")  # a new file (new inode) under the old name
    sink.wait_for(lambda s: "r0 recreated" in s.texts())
    follower.finish()
    assert sink.texts(rank=0) == ["r0 a", "r0 recreated"]


def test_undecodable_bytes_are_replaced(tmp_path: Path) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0]})
    append(a0 / "rank-0.log", b"ok \xff\xfe bad\n\xc3")
    sink = Recorder()
    show_logs(record(tmp_path), LogsRequest(), sink, state_fn=JobStateSwitch("COMPLETED"))
    assert sink.texts() == ["ok \ufffd\ufffd bad", "\ufffd"]


@pytest.mark.parametrize("notify", [True, False], ids=["inotify", "polling"])
def test_new_line_arrives_within_half_a_second_when_idle(tmp_path: Path, notify: bool) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0]})
    append(a0 / "rank-0.log", b"")
    sink, states = Recorder(), JobStateSwitch()
    follower = FollowThread(tmp_path, sink, states, config=FollowConfig(notify=notify))  # the real timings
    follower.start()
    time.sleep(2.5)  # long enough for the backoff to reach its slowest pause
    written = time.monotonic()
    append(a0 / "rank-0.log", b"ping\n")
    sink.wait_for(lambda s: "ping" in s.texts(), timeout=5)
    latency = sink.rows[0][0] - written
    calls = states.calls
    follower.finish()
    assert latency <= 0.6
    assert calls <= 3  # one at start, then at most one every 2 s: never per poll


def test_dump_holds_a_partial_line_until_the_job_ends(tmp_path: Path) -> None:
    make_attempt(tmp_path, 0, {"n1": [0]})
    append(tmp_path / "attempt-0" / "rank-0.log", b"older attempt, cut")
    a1 = make_attempt(tmp_path, 1, {"n1": [0]})
    append(a1 / "rank-0.log", b"done\nstill writing")
    running, ended = Recorder(), Recorder()
    request = LogsRequest(attempt="all")
    show_logs(record(tmp_path), request, running, state_fn=JobStateSwitch("RUNNING"))
    show_logs(record(tmp_path), request, ended, state_fn=JobStateSwitch("COMPLETED"))
    assert running.texts() == ["older attempt, cut", "done"]
    assert ended.texts() == ["older attempt, cut", "done", "still writing"]
    assert running.notes() == ["-- attempt 0 --", "-- attempt 1 --"]
    finished = JobRecord("123", "job", str(tmp_path), "local", 0.0, final_state="CANCELLED")
    by_record = Recorder()
    show_logs(finished, LogsRequest(), by_record, state_fn=lambda r: pytest.fail("final_state is authoritative"))
    assert by_record.texts() == ["done", "still writing"]


def test_filters_on_real_files(tmp_path: Path) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0, 1], "n2": [2, 3]})
    for r in range(4):
        append(a0 / f"rank-{r}.log", f"r{r} step 1\nr{r} loss 0.5\n".encode())
    sink = Recorder()
    flt = LineFilter(ranks=parse_rank_spec("1-3"), nodes=frozenset({"n2"}), grep=None)
    show_logs(record(tmp_path), LogsRequest(flt=flt), sink, state_fn=JobStateSwitch("COMPLETED"))
    assert sink.texts() == ["r2 step 1", "r2 loss 0.5", "r3 step 1", "r3 loss 0.5"]
    with pytest.raises(LogsError, match="outside the job's world size 4"):
        show_logs(record(tmp_path), LogsRequest(flt=LineFilter(ranks=frozenset({4}))), sink)
    with pytest.raises(LogsError, match="did you mean 'n2'"):
        show_logs(record(tmp_path), LogsRequest(flt=LineFilter(nodes=frozenset({"n3"}))), sink)


def test_errors_names_the_root_cause_not_the_nccl_collateral(tmp_path: Path) -> None:
    a0 = make_attempt(tmp_path, 0, {"n1": [0, 1], "n2": [2, 3]})
    collateral = b"step 9\nRuntimeError: NCCL communicator was aborted on rank 0.\n"
    root = b'step 9\nTraceback (most recent call last):\n  File "t.py", line 3\nRuntimeError: CUDA error: oom\n'
    for r, data in enumerate([collateral, collateral, root, b"step 9\nstep 10\n"]):
        append(a0 / f"rank-{r}.log", data)
    os.utime(a0 / "rank-0.log", (100, 100))  # collateral written earlier than the real error still loses
    os.utime(a0 / "rank-2.log", (200, 200))
    sink = Recorder()
    show_logs(record(tmp_path), LogsRequest(errors=True), sink)
    assert [(s.rank, text) for _, s, text in sink.rows if s is not None] == [
        (2, "RuntimeError: CUDA error: oom"),
        (0, "RuntimeError: NCCL communicator was aborted on rank 0."),
        (1, "RuntimeError: NCCL communicator was aborted on rank 0."),
    ]
    assert sink.notes()[0].startswith("-- first failure in attempt 0: rank 2 on n2, line 2 (earliest non-NCCL")


def test_state_query_failure_is_not_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ddpctl.errors import CommandError

    make_attempt(tmp_path, 0, {"n1": [0]})
    states = JobStateSwitch()
    calls = {"n": 0}

    def flaky(rec: JobRecord) -> object:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise CommandError("squeue: timed out")
        return states(rec)

    follower = FollowThread(tmp_path, Recorder(), flaky, config=FAST)  # type: ignore[arg-type]
    follower.start()
    states.end()
    follower.join(10)
    assert follower.result is not None
    assert calls["n"] == 3
    assert capsys.readouterr().err.count("squeue: timed out") == 1


MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
server:/export /home nfs4 rw,vers=4.2 0 0
10.0.0.1@o2ib:/scratch /scratch lustre rw 0 0
tmpfs /scratch/local\\040disk tmpfs rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "fstype"),
    [
        ("/data/run", "ext4"),
        ("/home/alice/runs", "nfs4"),
        ("/home", "nfs4"),
        ("/homework", "ext4"),
        ("/scratch/job/attempt-0", "lustre"),
        ("/scratch/local disk/run", "tmpfs"),
    ],
)
def test_mount_fs_type_decides_whether_inotify_is_trusted(path: str, fstype: str) -> None:
    assert mount_fs_type(path, MOUNTS) == fstype


def test_notifier_wakes_on_a_write(tmp_path: Path) -> None:
    notifier = Notifier.open(tmp_path)
    if notifier is None:
        pytest.skip("no inotify for this filesystem here (the follower polls)")
    try:
        assert notifier.watch(tmp_path)
        assert notifier.wait(0.05) is False
        append(tmp_path / "rank-0.log", b"x\n")
        assert notifier.wait(5.0) is True
        assert notifier.wait(0.05) is False  # the events were consumed
        assert not notifier.watch(tmp_path / "missing")
    finally:
        notifier.close()


@pytest.mark.parametrize("budget", [1, 4])
@pytest.mark.parametrize("timed", [False, True], ids=["untimed", "timed"])
def test_reads_without_keeping_descriptors_past_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, timed: bool, budget: int
) -> None:
    # Room for `budget` kept descriptors (logs and, when timed, their sidecars): the other files are opened per
    # read; every kept one is given back at the end.
    monkeypatch.setattr(FDS, "left", budget)
    a0 = make_attempt(tmp_path, 0, {"n1": [0, 1, 2]})

    def write(log: Path, data: bytes) -> None:
        if timed:
            append_timed(log, data, time.time())
        else:
            append(log, data)

    for r in range(3):
        write(a0 / f"rank-{r}.log", f"r{r} one\n".encode())
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch())
    follower.start()
    sink.wait_for(lambda s: len(s.texts()) == 3)
    for r in range(3):
        write(a0 / f"rank-{r}.log", f"r{r} two\n".encode())
    sink.wait_for(lambda s: len(s.texts()) == 6)
    follower.finish()
    assert FDS.left == budget  # every kept descriptor was closed again
    assert sorted(sink.texts()) == sorted(f"r{r} {n}" for r in range(3) for n in ("one", "two"))


def test_follow_says_why_a_job_is_pending_once_per_reason(tmp_path: Path) -> None:
    reasons = iter(["Priority", "Priority", "PartitionNodeLimit", "PartitionNodeLimit"])

    def query(rec: JobRecord) -> object:
        from ddpctl.run.state import JobState

        reason = next(reasons, None)
        return JobState("PENDING", reason=reason) if reason else JobState("COMPLETED")

    sink = Recorder()
    follower = FollowThread(tmp_path, sink, query, config=FAST)  # type: ignore[arg-type]
    follower.start()
    follower.join(20)
    assert follower.result is not None and follower.result.state == "COMPLETED"
    assert sink.notes() == [
        "-- job 123 PENDING (Priority) --",
        "-- job 123 PENDING (PartitionNodeLimit) --",
        "-- job 123 COMPLETED --",
    ], sink.notes()


def append_timed(log: Path, data: bytes, when: float) -> None:
    """As the stamper writes: the bytes, then their write time in the `.times` sidecar."""
    append(log, data)
    with Path(logtimes.times_of(log)).open("ab") as sidecar:
        sidecar.write(logtimes.record(log.stat().st_size, when))


@pytest.mark.parametrize("mode", MODES)
def test_follow_holds_lines_written_after_the_pass_began(tmp_path: Path, mode: str) -> None:
    # A pass over many busy files takes time: a file read early in a pass can get a line older than one of a file
    # read later in the same pass. Lines are printed only up to when the last pass began (less HOLD_S), so such a
    # pair still comes out in write order. The pass's length is played by the follower's clock, which the test
    # moves; the write times are long past by the real clock, so only that clock can hold a line back.
    attempt = make_attempt(tmp_path, 0, {"n1": [0, 1, 2]})
    base = time.time() - 1000.0
    clock = [base]
    for rank in (0, 1, 2):
        append(attempt / f"rank-{rank}.log", b"")
        append(Path(logtimes.times_of(attempt / f"rank-{rank}.log")), b"")
    append_timed(attempt / "rank-1.log", b"r1 during the pass\n", base + 0.5)  # after the pass began
    append_timed(attempt / "rank-2.log", b"r2 before the pass\n", base - 1.0)
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch(), config=replace(MODES[mode], wall=lambda: clock[0]))
    follower.start()
    # rank 2 is read after rank 1 in a pass: once its line is out, rank 1's has been read too.
    sink.wait_for(lambda s: "r2 before the pass" in s.texts())
    append_timed(attempt / "rank-0.log", b"r0 during the pass, older\n", base + 0.3)  # rank 0 was read already
    clock[0] = base + 5.0  # later passes
    sink.wait_for(lambda s: "r0 during the pass, older" in s.texts())
    follower.finish()
    assert sink.texts() == ["r2 before the pass", "r0 during the pass, older", "r1 during the pass"]
