"""runtime.series: the per-rank metrics series the Heartbeat appends, bounded, and its tolerant reader."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ddpctl.run import envvars
from ddpctl.run.layout import RunLayout
from ddpctl.runtime import series
from ddpctl.runtime.progress import Heartbeat
from ddpctl.runtime.series import Series, attempt_series, read_series


def env_for(run_dir: Path, rank: int = 1) -> dict[str, str]:
    return {envvars.RUN_DIR: str(run_dir), envvars.ATTEMPT: "2", "RANK": str(rank), envvars.NODE_NAME: "n7"}


def record(step: int, t: float, **values: Any) -> dict[str, Any]:
    return {"step": step, "written": t, "samples": step * 8, "step_s": 0.5, "busy_s": 0.4, "values": values}


def test_heartbeat_appends_at_most_one_point_a_second_with_the_values(tmp_path: Path) -> None:
    beat = Heartbeat(every_s=0.01, env=env_for(tmp_path))
    start = time.monotonic()
    step = 0
    while time.monotonic() - start < 2.5:
        step += 1
        beat.step(step, epoch=0, samples=4, loss=10.0 / step, name="not a number")
        time.sleep(0.002)
    beat.close()
    read = read_series(RunLayout(tmp_path).series_file(2, 1))
    assert read.unreadable == 0 and 2 <= len(read.points) <= 4, read.points
    steps = [p["step"] for p in read.points]
    assert steps == sorted(set(steps)) and steps[0] == 1
    gaps = [b["t"] - a["t"] for a, b in zip(read.points, read.points[1:], strict=False)]
    assert all(gap >= 1.0 for gap in gaps[:-1]), gaps  # the last one may be the close's final point
    last = read.points[-1]
    assert last["v"] == {"loss": round(10.0 / last["step"], 6)} and last["samples"] == 4 * last["step"]
    assert 0 <= last["busy_s"] <= last["step_s"]


def test_idle_pulses_and_repeated_steps_add_nothing(tmp_path: Path) -> None:
    path = tmp_path / "series-0.jsonl"
    writer = Series(path)
    for t in range(10):
        writer.add(record(5, 1000.0 + t))
    assert len(read_series(path).points) == 1


def test_a_long_run_stays_bounded_old_points_thinned_newest_kept(tmp_path: Path) -> None:
    path = tmp_path / "series-0.jsonl"
    writer = Series(path)
    total = series.MAX_POINTS * 4
    for step in range(1, total + 1):
        writer.add(record(step, 1000.0 + step, loss=1.0 / step))
    read = read_series(path)
    assert read.unreadable == 0 and len(read.points) <= series.MAX_POINTS
    steps = [p["step"] for p in read.points]
    assert steps[0] == 1 and steps[-1] == total and steps == sorted(steps)
    assert steps[-series.MAX_POINTS // 4 :] == list(range(total - series.MAX_POINTS // 4 + 1, total + 1))
    assert path.stat().st_size < series.MAX_BYTES


def test_a_restarted_rank_continues_the_attempts_file(tmp_path: Path) -> None:
    path = tmp_path / "series-0.jsonl"
    Series(path).add(record(1, 1000.0))
    again = Series(path)
    again.add(record(1, 1001.0))  # the same step as the file's last point: not repeated
    again.add(record(2, 1002.0))
    assert [p["step"] for p in read_series(path).points] == [1, 2]


def test_a_symlinked_series_file_is_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    attempt = tmp_path / "run" / "attempt-2"
    attempt.mkdir(parents=True)
    (attempt / "series-1.jsonl").symlink_to(outside)
    beat = Heartbeat(every_s=0.01, env=env_for(tmp_path / "run"))
    beat.step(1, loss=1.0)
    beat.close()
    assert outside.read_text() == "keep\n"
    assert read_series(attempt / "series-1.jsonl").error is not None


def test_an_unwritable_attempt_dir_never_raises_into_training(tmp_path: Path) -> None:
    (tmp_path / "attempt-2").write_text("a file where the directory should be")
    beat = Heartbeat(every_s=0.01, env=env_for(tmp_path))
    beat.step(1, loss=1.0)
    beat.close()


CRAFTED = [
    b'{"t": 1000.0, "step": 1, "v": {"loss": 2.0}}',
    b'{"t": 1001.0, "step": 2, "v": {"loss": 1e300}}',  # beyond any plottable bound
    b'{"t": 1002.0, "step": true}',  # a bool is not a step
    b'{"t": "now", "step": 3}',
    b'{"t": 1003.0, "step": -4}',
    b'{"t": 1004.0, "step": 5, "busy_s": NaN}',
    b'{"t": 1005.0, "step": 6, "v": {"' + b"x" * 500 + b'": 1}}',
    b'{"t": 1006.0, "step": 7, "v": ' + json.dumps({f"k{i}": i for i in range(100)}).encode() + b"}",
    b"[1, 2, 3]",
    b"\xff\xfe garbage",
    b'{"t": 1007.0, "step": 8, "step_s": 0.25, "busy_s": 0.2, "v": {"loss": 0.5}}',
    b'{"t": 1008.0, "st',  # cut in the middle of a write
]


def test_reader_keeps_only_valid_points_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "series-0.jsonl"
    path.write_bytes(b"\n".join(CRAFTED))
    read = read_series(path)
    assert [p["step"] for p in read.points] == [1, 8]
    assert read.points[1] == {"t": 1007.0, "step": 8, "step_s": 0.25, "busy_s": 0.2, "v": {"loss": 0.5}}
    assert read.unreadable == len(CRAFTED) - 2 and not read.truncated and read.error is None


def test_reader_bounds_a_huge_file(tmp_path: Path) -> None:
    path = tmp_path / "series-0.jsonl"
    line = b'{"t": 1000.0, "step": 1}\n'
    with path.open("wb") as handle:
        handle.write(line * (series.MAX_BYTES // len(line) + 10))
    read = read_series(path)
    assert read.truncated and len(read.points) <= series.MAX_POINTS * 2


def test_reader_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "series-0.jsonl")
    assert read_series(tmp_path / "series-0.jsonl").points == []


def test_attempt_series_finds_every_ranks_file(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    for rank in (0, 3):
        Series(layout.series_file(1, rank)).add(record(1, 1000.0))
    (layout.attempt_dir(1) / "series-x.jsonl").write_text("ignored")
    assert sorted(attempt_series(layout, 1)) == [0, 3] and attempt_series(layout, 7) == {}
