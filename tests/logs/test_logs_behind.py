"""`ddpctl logs -f` behind its writers: the ordering window, skipping ahead and the line that says so."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path

import pytest
from test_logs_support import FAST, FollowThread, JobStateSwitch, Recorder, append, make_attempt

from ddpctl.logs import behind
from ddpctl.logs.behind import Skipped, count_lines, rank_ranges, release_mark, seen_by, skip_bound
from ddpctl.logs.core import Source
from ddpctl.logs.files import FileTail
from ddpctl.run import logtimes

# (size, first seen, last seen so) as passes saw a file; the cutoff; how far every byte had been seen by then.
SEEN_BY = [
    ([], 5.0, 0),
    ([(0, 10.0, 10.0), (100, 10.0, 10.0)], 9.9, 0),  # all of it first seen at 10
    ([(0, 10.0, 10.0), (100, 10.0, 10.0)], 10.0, 100),
    ([(0, 0.0, 0.0), (100, 1.0, 1.0), (300, 2.0, 2.0)], 0.5, 50),  # between two passes: evenly
    ([(0, 0.0, 0.0), (100, 1.0, 1.0), (300, 2.0, 2.0)], 1.0, 100),
    ([(0, 0.0, 0.0), (100, 1.0, 1.0), (300, 2.0, 2.0)], 1.5, 200),
    ([(0, 0.0, 0.0), (100, 1.0, 1.0), (300, 2.0, 2.0)], 7.0, 300),
    ([(100, 1.0, 1.0), (300, 3.0, 3.0)], 0.5, 0),  # the first point is where reading stands: nothing older
    ([(100, 1.0, 1.0), (300, 3.0, 3.0)], 2.0, 200),
    # a file at 100 bytes from 1.0 to 9.0 (a quiet rank): the 200 after it came between 9.0 and 10.0, not since 1.0
    ([(100, 1.0, 9.0), (300, 10.0, 10.0)], 8.0, 100),
    ([(100, 1.0, 9.0), (300, 10.0, 10.0)], 9.5, 200),
]


@pytest.mark.parametrize(("points", "cutoff", "expected"), SEEN_BY)
def test_seen_by(points: list[tuple[int, float, float]], cutoff: float, expected: int) -> None:
    assert seen_by(points, cutoff) == expected


# started, hold, window, last time shown of each rank with bytes unread -> lines shown up to
MARKS = [
    (10.0, 0.1, None, [], 9.9),
    (10.0, 0.1, None, [5.0], 5.0),  # no window: a slow rank holds everyone back, however long
    (10.0, 0.1, None, [9.95], 9.9),
    (10.0, 0.1, 0.5, [], 10.4),  # what was written up to 0.5 s after the pass began (by the hold) goes too
    (10.0, 0.1, 0.5, [9.7], 10.2),  # a rank behind but within the window: up to 0.5 s past its last line
    (10.0, 0.1, 0.5, [5.0], 9.5),  # a rank far behind: no line waits more than 0.5 s for it
    (10.0, 0.1, 0.5, [9.7, 2.0], 9.5),
]


@pytest.mark.parametrize(("started", "hold", "window", "held", "expected"), MARKS)
def test_release_mark(started: float, hold: float, window: float | None, held: list[float], expected: float) -> None:
    assert release_mark(started, hold, window, held) == pytest.approx(expected)


# the most, the follower's last cycle -> the bound used
BOUNDS = [(0.5, 0.05, 0.5), (0.5, 0.5, 0.5), (0.5, 0.65, 0.35), (0.5, 0.7, 0.3), (0.5, 0.8, 0.2), (0.5, 9.0, 0.2)]
BOUNDS += [(0.05, 9.0, 0.05), (2.0, 0.2, 0.8)]  # never over the most asked for, nor over the lag target's share


@pytest.mark.parametrize(("most", "cycle", "expected"), BOUNDS)
def test_skip_bound_shrinks_with_slow_cycles(most: float, cycle: float, expected: float) -> None:
    assert skip_bound(most, cycle) == pytest.approx(expected)


COUNTS = [
    (b"", 0, 0, (0, 0)),
    (b"a\nbb\nccc\n", 0, 9, (3, 9)),
    (b"a\nbb\nccc\n", 2, 9, (2, 9)),
    (b"a\nbb\nccc", 0, 8, (2, 5)),  # a partial last line stays to be read
    (b"a\nbb\nccc\n", 0, 4, (1, 2)),
    (b"abc", 0, 3, (0, 0)),
]


@pytest.mark.parametrize(("data", "start", "limit", "expected"), COUNTS)
def test_count_lines(data: bytes, start: int, limit: int, expected: tuple[int, int]) -> None:
    got = count_lines(lambda at, size: data[at : at + size], start, limit)
    assert got == (expected[0], max(expected[1], start))


def test_count_lines_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(behind, "SKIP_BLOCK", 4)
    data = b"0123456\n89\nab"
    assert count_lines(lambda at, size: data[at : at + size], 0, len(data)) == (2, 11)


@pytest.mark.parametrize(
    ("ranks", "text"), [([0], "0"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([3, 1, 2, 2], "1-3"), ([9, 4], "4,9")]
)
def test_rank_ranges(ranks: list[int], text: str) -> None:
    assert rank_ranges(ranks) == text


def test_skipped_note_names_counts_ranks_and_how_to_read_them() -> None:
    skipped = Skipped()
    skipped.add(3, 10, 700)
    skipped.add(4, 5, 300)
    skipped.add(3, 1, 70)
    skipped.bound = 0.5
    assert skipped.note("42", 1) == (
        "[ddpctl] -f fell behind the writers by more than 0.5 s: skipped 16 lines (1,070 bytes) of ranks 3-4 in "
        "attempt 1; they are in the rank files: `ddpctl logs 42 --attempt 1` (without -f) shows them"
    )
    assert not skipped  # counted again from nothing


def lines_of(tag: str, count: int) -> bytes:
    return b"".join(b"%s %05d\n" % (tag.encode(), i) for i in range(count))


@pytest.mark.parametrize("timed", [False, True])
def test_tail_skips_only_bytes_seen_before_the_cutoff(tmp_path: Path, timed: bool) -> None:
    log = tmp_path / "rank-0.log"
    old, new = lines_of("old", 500), lines_of("new", 20)  # 10-byte lines
    log.write_bytes(old)
    if timed:  # one record per line, as the stamper writes them
        ends = itertools.accumulate([10] * 500)
        (tmp_path / "rank-0.times").write_text("".join(f"{end} {100 + i * 0.001:.6f}\n" for i, end in enumerate(ends)))
    tail = FileTail(log, Source(0, "n", 0), chunk=1000)
    first = tail.poll_raw(None, 1.0, 0.5)  # first seen at 1.0: nothing is older than the cutoff
    assert first is not None and len(first[1]) == 100 and tail.skipped == (0, 0)
    append(log, new)
    if timed:
        with (tmp_path / "rank-0.times").open("a") as f:
            f.write("".join(f"{5000 + 10 * (i + 1)} 200.0\n" for i in range(20)))
    second = tail.poll_raw(None, 3.0, 1.0)  # the old bytes were seen at 1.0 and not shown: skipped
    assert tail.skipped == (400, 4000)
    assert second is not None
    assert second[1] == lines_of("new", 20).splitlines()
    if timed:
        assert second[0] == [200.0] * 20
    assert tail.poll_raw(None, 10.0, 9.0) is None and tail.skipped == (0, 0)  # nothing new, nothing skipped


def test_tail_skip_counts_a_held_partial_line_and_resumes_on_a_whole_line(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    log.write_bytes(b"one\ntw")
    tail = FileTail(log, Source(0, None, 0))
    assert tail.poll_raw(None, 1.0, 0.0) == ([None], [b"one"])
    append(log, b"o\nthree\nfour")
    # "tw" was seen at 1.0; the 12 bytes after it arrived between 1.0 and 2.0, taken as evenly: 9 of them by 1.75,
    # and the skip stops at the last whole line among those, after "three\n"
    got = tail.poll_raw(None, 2.0, 1.75)
    assert tail.skipped == (2, len(b"two\nthree\n"))
    assert got == ([], []) and tail.has_partial
    append(log, b"\n")
    assert tail.poll_raw(None, 3.0, 1.0) == ([None], [b"four"])


def test_follower_behind_by_more_than_the_bound_skips_ahead_and_says_so(tmp_path: Path) -> None:
    """A pass reads 1 KiB of each file; the clock says every pass comes 1 s after the last, so what the first pass
    saw and left unread is 1 s old at the second: skipped, with a note. The other rank is not held back."""
    attempt = make_attempt(tmp_path, 0, {"n1": [0, 1]})
    append(attempt / "rank-0.log", lines_of("r0", 1000))
    append(attempt / "rank-1.log", b"r1 only line\n")
    ticks = itertools.count(1000)
    config = replace(FAST, chunk=1024, skip_after=0.5, window=0.5, wall=lambda: float(next(ticks)), skip_backlog=0)
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch(), config=config)
    follower.start()
    sink.wait_for(lambda s: any("skipped" in note for note in s.notes()))
    assert follower.finish() is not None
    notes = [note for note in sink.notes() if "skipped" in note]
    assert len(notes) == 1
    shown = sink.texts(rank=0)
    skipped = 1000 - len(shown)
    assert 0 < len(shown) < 1000 and shown == [f"r0 {i:05d}" for i in range(len(shown))]
    # every pass comes seconds after the last here: the bound is at its least
    assert notes[0].startswith(f"[ddpctl] -f fell behind the writers by more than 0.2 s: skipped {skipped:,} lines ")
    assert f"({skipped * 9:,} bytes) of rank 0 in attempt 0;" in notes[0]
    assert "`ddpctl logs 123 --attempt 0` (without -f)" in notes[0]
    assert sink.texts(rank=1) == ["r1 only line"]
    assert sink.notes()[-1] == "-- job 123 COMPLETED --"


def shows_every_line_unskipped(tmp_path: Path, bound: float | None = None) -> None:
    """A late follower (every pass 1 s after the last, 1 KiB a file a pass) of 1,000 lines: all shown, no note."""
    attempt = make_attempt(tmp_path, 0, {"n1": [0]})
    append(attempt / "rank-0.log", lines_of("r0", 1000))
    ticks = itertools.count(1000)
    config = replace(FAST, chunk=1024, wall=lambda: float(next(ticks)), skip_after=bound, window=bound)
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch(), config=config)
    follower.start()
    sink.wait_for(lambda s: len(s.texts()) == 1000)
    assert follower.finish() is not None
    assert not [note for note in sink.notes() if "skipped" in note]


def test_a_follower_late_by_less_than_the_backlog_floor_skips_nothing(tmp_path: Path) -> None:
    """The late follower of the skip test, with the command's floor: each pass takes in 1 KiB, below
    SKIP_MIN_BACKLOG, so every line is shown. A test following a small job on a loaded machine (or a user
    watching for one error line) lost lines to a moment's starvation."""
    shows_every_line_unskipped(tmp_path, 0.5)


def test_follower_without_a_bound_shows_every_line(tmp_path: Path) -> None:
    """The Python API's follower (no skip bound): the same clock and chunk, every line shown, no note."""
    shows_every_line_unskipped(tmp_path)


def test_records_of_skipped_bytes_are_not_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Skipping is decided before the sidecar is read: the records of the bytes skipped are jumped over where one
    ends exactly where the skip does (the stamper's record per line), not parsed (most of a timed pass's work)."""
    log, times = tmp_path / "rank-0.log", tmp_path / "rank-0.times"

    def write(tag: str, count: int, first: int, when: float) -> None:
        append(log, lines_of(tag, count))
        append(times, b"".join(b"%d %.6f\n" % ((first + i + 1) * 10, when + i * 0.001) for i in range(count)))

    write("old", 100, 0, 100.0)
    tail = FileTail(log, Source(0, "n", 0))
    assert len(tail.poll_raw(None, 1.0, 0.0)[1]) == 100  # type: ignore[index]
    write("mid", 400, 100, 101.0)
    parsed: list[int] = []
    real = logtimes.parse_columns

    def counting(data: bytes) -> tuple[list[int], list[float], int]:
        result = real(data)
        parsed.append(len(result[0]))
        return result

    monkeypatch.setattr(logtimes, "parse_columns", counting)
    assert tail.poll_raw(None, 2.0, 2.0) is None  # all 400 seen by 2.0: skipped
    assert tail.skipped == (400, 4000) and sum(parsed) <= 1  # the record ending at 5000, nothing before it
    assert tail.stamps.last == pytest.approx(101.399)
    write("new", 20, 500, 200.0)
    got = tail.poll_raw(None, 3.0, 2.0)
    assert got is not None and got[1] == lines_of("new", 20).splitlines()
    assert got[0] == pytest.approx([200.0 + i * 0.001 for i in range(20)])


@pytest.mark.parametrize("mode", ["inotify", "polling"])
def test_a_burst_after_a_rest_is_shown_whole(tmp_path: Path, mode: str) -> None:
    """A follower that rested (its last pass read nothing) is not behind: a burst that came while it waited is
    shown whole, though by its clock (a second a call here) the burst is seconds old by the time it is read."""
    attempt = make_attempt(tmp_path, 0, {"n1": [0, 1]})
    append(attempt / "rank-0.log", b"first\n")
    ticks = itertools.count(1000)
    config = replace(
        FAST, skip_after=0.5, window=0.5, wall=lambda: float(next(ticks)), notify=mode == "inotify", skip_backlog=0
    )
    sink = Recorder()
    follower = FollowThread(tmp_path, sink, JobStateSwitch(), config=config)
    follower.start()
    sink.wait_for(lambda s: s.texts() == ["first"])
    time.sleep(0.5)  # passes that read nothing: resting
    append(attempt / "rank-1.log", lines_of("r1", 300))
    append(attempt / "rank-0.log", lines_of("r0", 300))
    sink.wait_for(lambda s: len(s.texts()) == 601)
    assert follower.finish() is not None
    assert not [note for note in sink.notes() if "skipped" in note]
    assert sink.texts(rank=0) == ["first", *(f"r0 {i:05d}" for i in range(300))]
