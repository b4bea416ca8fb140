"""`ddpctl logs` merges ranks in the order their lines were written: real workers (ddpctl.node.worker, whose
stamper records each write's time beside the log), a real registry, the real CLI."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from test_logs_support import MODES, Recorder, make_attempt

from ddpctl.logs.core import LineSplitter, Source, format_time
from ddpctl.logs.merge import Merger
from ddpctl.logs.output import PlainSink
from ddpctl.logs.show import LogsRequest, show_logs
from ddpctl.logs.stamps import Stamps
from ddpctl.node import stamper
from ddpctl.run import envvars, logtimes
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.state import JobState

REPO = Path(__file__).resolve().parents[2]

# Rank 1 fails for real; rank 0 only reports the broken connection afterwards (Gloo's collateral error).
RANK_BODIES = {
    1: """
        import pathlib, sys
        print("rank 1 step 1")
        print("RuntimeError: CUDA error: an illegal memory access", file=sys.stderr, flush=True)
        pathlib.Path(sys.argv[1]).touch()
    """,
    0: """
        import pathlib, sys, time
        print("rank 0 step 1", flush=True)
        while not pathlib.Path(sys.argv[1]).exists():
            time.sleep(0.01)
        time.sleep(0.05)
        print("RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer", file=sys.stderr)
    """,
}


def start_worker(
    attempt_dir: Path, rank: int, body: str, *args: str, new_session: bool = False
) -> subprocess.Popen[bytes]:
    script = attempt_dir.parent / f"job-{rank}.py"
    script.write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPCTL_")}
    env.update({envvars.RANK_LOG: str(attempt_dir / "rank-{rank}.log"), envvars.NODE_NAME: "node1", "RANK": str(rank)})
    argv = [sys.executable, "-m", "ddpctl.node.worker", str(script), *args]
    return subprocess.Popen(argv, env=env, cwd=REPO, start_new_session=new_session)


@pytest.fixture
def failed_job(tmp_path: Path) -> Path:
    """Rank 0 starts first (its file sorts first), rank 1 errs, then rank 0 reports the collateral error."""
    run_dir = tmp_path / "runs" / "train" / "7"
    attempt = make_attempt(run_dir, 0, {"node1": [0, 1]})
    flag = tmp_path / "rank1-failed"
    workers = [start_worker(attempt, rank, RANK_BODIES[rank], str(flag)) for rank in (0, 1)]
    for worker in workers:
        assert worker.wait(60) == 0
    Registry(tmp_path).add(JobRecord("7", "train", str(run_dir), "local", 1.0, final_state="FAILED"))
    return tmp_path


def ddpctl_logs(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DDPCTL_HOME": str(home)}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "ddpctl", "logs", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_collateral_error_written_later_prints_later(failed_job: Path) -> None:
    # No job argument: the newest job, as status and top do.
    proc = ddpctl_logs(failed_job)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "[ddpctl.worker]" not in line]
    real = lines.index("[a0 node1 r1] RuntimeError: CUDA error: an illegal memory access")
    collateral = lines.index(
        "[a0 node1 r0] RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer"
    )
    assert real < collateral


def test_timestamps_show_each_lines_write_time(failed_job: Path) -> None:
    proc = ddpctl_logs(failed_job, "7", "--timestamps", "--rank", "1")
    assert proc.returncode == 0, proc.stderr
    stamp, rest = proc.stdout.splitlines()[1].split(" ", 1)
    assert rest == "[a0 node1 r1] rank 1 step 1"
    written = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert stamp.endswith("Z") and abs(written - time.time()) < 120
    as_json = ddpctl_logs(failed_job, "7", "--timestamps", "--json", "--rank", "1")
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [format_time(row["time"]) for row in rows] == [line.split(" ", 1)[0] for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_follow_merges_by_write_time(failed_job: Path, mode: str) -> None:
    run_dir = failed_job / "runs" / "train" / "7"
    record = JobRecord("7", "train", str(run_dir), "local", 1.0)
    sink = Recorder()
    show_logs(record, LogsRequest(follow=True), sink, state_fn=lambda _: JobState("FAILED"), config=MODES[mode])
    texts = sink.texts()
    assert texts.index("RuntimeError: CUDA error: an illegal memory access") < texts.index(
        "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer"
    )


def test_logs_written_without_times_keep_rank_order(tmp_path: Path) -> None:
    """An older run dir (no sidecars): rank by rank, as before."""
    run_dir = tmp_path / "runs" / "old" / "3"
    attempt = make_attempt(run_dir, 0, {"n1": [0, 1]})
    (attempt / "rank-1.log").write_text("one a\none b\n")
    (attempt / "rank-0.log").write_text("zero a\nzero b\n")
    record = JobRecord("3", "old", str(run_dir), "local", 1.0, final_state="COMPLETED")
    sink = Recorder()
    show_logs(record, LogsRequest(), sink)
    assert sink.texts() == ["zero a", "zero b", "one a", "one b"]


def test_stamper_saves_the_last_words_of_a_killed_process_group(tmp_path: Path) -> None:
    # torchrun stops workers with SIGTERM to their process group: the stamper must outlive the worker.
    attempt = make_attempt(tmp_path / "run", 0, {"n1": [0]})
    body = """
        import os, signal
        for i in range(2000):
            print(f"line {i}")
        os.killpg(0, signal.SIGTERM)
    """
    worker = start_worker(attempt, 0, body, new_session=True)
    assert worker.wait(60) == -signal.SIGTERM
    log = attempt / "rank-0.log"
    deadline = time.monotonic() + 10
    while log.read_text().count("\n") < 2001 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log.read_text().splitlines()[1:] == [f"line {i}" for i in range(2000)]
    records, _ = logtimes.parse_times(Path(logtimes.times_of(log)).read_bytes())
    assert records[-1][0] == log.stat().st_size


@pytest.mark.parametrize(
    ("sidecar", "chunks", "expected"),
    [
        # one write per line
        (b"2 10.0\n4 11.0\n", [b"a\nb\n"], [(10.0, ["a"]), (11.0, ["b"])]),
        # a line completed by a later write gets that write's time
        (b"1 10.0\n4 11.0\n", [b"a\nb\n"], [(11.0, ["a", "b"])]),
        # read in two pieces, across a record
        (b"3 10.0\n6 12.0\n", [b"a\nb", b"\nc\n"], [(10.0, ["a"]), (12.0, ["b", "c"])]),
        # a torn last record and a damaged one are ignored; bytes past the last record: the last time
        (b"2 10.0\nxx\n4 11", [b"a\nb\n"], [(10.0, ["a", "b"])]),
        # one record per line, read whole or in pieces (the follower's fast path) and not at a line's end
        (b"2 10.0\n4 11.0\n6 12.0\n", [b"a\nb\n", b"c\n"], [(10.0, ["a"]), (11.0, ["b"]), (12.0, ["c"])]),
        (b"2 10.0\n3 11.0\n5 12.0\n", [b"a\nb\nc\n"], [(10.0, ["a"]), (12.0, ["b", "c"])]),
        (b"2 10.0\n4 11.0\n", [b"a\nb\nc\n"], [(10.0, ["a"]), (11.0, ["b", "c"])]),
    ],
)
def test_stamps_split_lines_by_write(
    tmp_path: Path, sidecar: bytes, chunks: list[bytes], expected: list[tuple[float, list[str]]]
) -> None:
    log = tmp_path / "rank-0.log"
    log.write_bytes(b"".join(chunks))
    Path(logtimes.times_of(log)).write_bytes(sidecar)
    stamps, splitter, start, got = Stamps(str(log)), LineSplitter(), 0, []
    assert stamps.refresh(log.stat().st_size) is not None
    for chunk in chunks:
        got += stamps.split(start, chunk, splitter)
        start += len(chunk)
    assert [(when, lines) for when, lines in got if lines] == [(when, lines) for when, lines in expected if lines]


ADVICE = (
    b"[rank1]:[W reducer.cpp:1400] Warning: find_unused_parameters=True was specified in DDP constructor, but did"
    b" not find any unused parameters in the forward pass. (function operator())\n"
)


@pytest.mark.parametrize(
    ("reads", "logged"),
    [
        # The reducer's advice is left out whole; everything around it stays, byte for byte.
        ([b"step 1\n" + ADVICE + b"step 2\n"], b"step 1\nstep 2\n"),
        ([ADVICE], b""),
        # Cut across two reads: neither part is a whole line of this read, so the line stays whole.
        ([ADVICE[:40], ADVICE[40:] + b"next\n"], ADVICE + b"next\n"),
        # A line that merely begins with the advice but is still being written stays until it is whole.
        ([b"a\n" + ADVICE[:-1]], b"a\n" + ADVICE[:-1]),
        # A rank's own line that quotes it in the middle of other text keeps it.
        ([b"x", ADVICE], b"x" + ADVICE),
    ],
)
def test_the_stamper_leaves_out_exactly_the_ddp_reducer_advice(
    tmp_path: Path, reads: list[bytes], logged: bytes
) -> None:
    log = tmp_path / "rank-1.log"
    log_fd, times_fd = (
        os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND),
        os.open(logtimes.times_of(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND),
    )
    read_fd, write_fd = os.pipe()
    serving = threading.Thread(target=stamper.serve, args=(read_fd, log_fd, times_fd))
    serving.start()
    try:
        for chunk in reads:
            os.write(write_fd, chunk)
            time.sleep(0.2)  # read before the next write: one read per chunk
        os.close(write_fd)
        serving.join(timeout=10)
    finally:
        for fd in (read_fd, log_fd, times_fd):
            os.close(fd)
    assert log.read_bytes() == logged


@pytest.mark.parametrize(
    ("sidecar", "records"),
    [
        (b"2 10.0\n4 11.25\n", [(2, 10.0), (4, 11.25)]),
        (b"2 10.0\n4 11.25\n6 12.0\n8 12.5\n10 13.0\n", [(2, 10.0), (4, 11.25), (6, 12.0), (8, 12.5), (10, 13.0)]),
        (b"2 10.0\n4 11", [(2, 10.0)]),  # a torn last record waits
        # damaged records are skipped, one at a time, wherever they are (the whole-buffer parse gives up)
        (b"2 10.0\nxx\n4 11.0\n", [(2, 10.0), (4, 11.0)]),
        (b"2 10.\n4 .5\n6 7\n8 1.0\n", [(8, 1.0)]),
        (b"2 1.0 3\n.5\n4 2.0\n", [(4, 2.0)]),
        (b"2 1.2.3\n4 5\n6 7.0\n", [(6, 7.0)]),
        (b" 2 1.0\n4  2.0\n1_0 3.0\n6 4.0\n", [(6, 4.0)]),
        (b"\n2 1.0\n", [(2, 1.0)]),
        # records must not run backwards
        (b"4 1.0\n2 2.0\n6 3.0\n", [(4, 1.0), (6, 3.0)]),
        (b"4 1.0\n4 2.0\n", [(4, 1.0), (4, 2.0)]),
    ],
)
def test_times_sidecar_parses_the_same_whole_or_record_by_record(
    sidecar: bytes, records: list[tuple[int, float]]
) -> None:
    assert logtimes.parse_times(sidecar) == (records, sidecar.rfind(b"\n") + 1)
    assert logtimes.parse_columns(sidecar)[:2] == ([end for end, _ in records], [when for _, when in records])
    # The same after four good records (past the few parsed one by one), and before them.
    good = [(100, 20.0), (101, 21.0), (102, 22.5), (103, 23.0)]
    good_bytes = b"".join(b"%d %.1f\n" % record for record in good)
    whole = sidecar[: sidecar.rfind(b"\n") + 1]
    assert logtimes.parse_times(good_bytes + whole)[0] == good + [r for r in records if r[0] >= 103]
    assert logtimes.parse_times(whole + good_bytes)[0] == records + good


@pytest.mark.parametrize(
    ("added", "upto", "shown", "held"),
    [
        # by time across ranks; within one rank, in the order read
        ([(1, [3.0, 5.0], ["a", "b"]), (0, [4.0], ["c"])], None, ["r1 a", "r0 c", "r1 b"], 0),
        # only what was written up to the watermark; the rest waits, in order, for the next release
        ([(1, [3.0, 5.0], ["a", "b"]), (0, [4.0, 6.0], ["c", "d"])], 4.0, ["r1 a", "r0 c"], 2),
        # equal times (logs without times, read in one pass): by rank, then in the order read
        (
            [(2, [1.0, 1.0], ["x", "y"]), (0, [1.0], ["z"]), (2, [1.0], ["w"])],
            None,
            ["r0 z", "r2 x", "r2 y", "r2 w"],
            0,
        ),
        # a time not known counts as the pass's time (`unknown`, here 2.0)
        ([(0, [None, 3.0], ["p", "q"]), (1, [2.5], ["s"])], None, ["r0 p", "r1 s", "r0 q"], 0),
        ([(0, [7.0], ["late"])], 6.0, [], 1),
    ],
)
def test_merger_releases_by_write_time_then_rank_then_read_order(
    added: list[tuple[int, list[float | None], list[str]]], upto: float | None, shown: list[str], held: int
) -> None:
    sources = {rank: Source(0, "n", rank) for rank, _, _ in added}
    recorded, merger = Recorder(), Merger()
    out = io.StringIO()
    plain, plain_merger = PlainSink(out), Merger()  # the sink that takes a release's lines at once (`ordered`)
    for rank, times, lines in added:
        merger.add_timed(times, sources[rank], [line.encode() for line in lines], 2.0)
        plain_merger.add_timed(times, sources[rank], [line.encode() for line in lines], 2.0)
    merger.release(recorded, upto)
    plain_merger.release(plain, upto)
    plain.flush()
    assert [f"r{src.rank} {text}" for _, src, text in recorded.rows if src is not None] == shown
    assert out.getvalue() == "".join(f"[a0 n {line.split()[0]}] {line.split()[1]}\n" for line in shown)
    assert bool(merger) == bool(held)
    merger.release(recorded)
    assert len(recorded.rows) == len(shown) + held == sum(len(lines) for _, _, lines in added)
