"""`ddpctl list --prune` and the registry's lock: old ended jobs go, live ones never, no append is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddpctl.backends import live_ids
from ddpctl.backends.local import processes as local_proc
from ddpctl.backends.prune import candidates, prune
from ddpctl.run.registry import JobRecord, Registry, refs_in

ROOT = Path(__file__).resolve().parents[2]
DAY = 86400.0
NOW = 100 * DAY


def record(
    job_id: str, age_days: float, name: str = "ex", backend: str = "local", run_dir: str = "/nonexistent"
) -> JobRecord:
    return JobRecord(job_id, name, run_dir, backend, NOW - age_days * DAY)


def test_candidates_are_the_old_records() -> None:
    records = [record("1", 40), record("2", 31), record("3", 29), record("4", 0)]
    assert [r.job_id for r in candidates(records, NOW, 30 * DAY)] == ["1", "2"]
    assert [r.job_id for r in candidates(records, NOW, 0)] == ["1", "2", "3", "4"]


def test_prune_keeps_live_and_young_jobs_and_compacts(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    for r in (record("1", 40), record("2", 40), record("3", 1)):
        registry.add(r)
    registry.add(JobRecord("2", "ex", "/nonexistent", "local", NOW - 40 * DAY, pid=7))  # a later line for job 2
    done = prune(registry, NOW, 30 * DAY, live=lambda old: {"2"})
    assert (done.kept, done.dropped) == (2, 1)
    lines = registry.path.read_text().splitlines()
    assert [json.loads(line)["job_id"] for line in lines] == ["2", "3"]  # one line per job
    assert registry.records()[0].pid == 7


def test_a_local_job_whose_lock_is_held_is_live(tmp_path: Path) -> None:
    running, ended = tmp_path / "local-1", tmp_path / "local-2"
    running.mkdir()
    ended.mkdir()
    fd = local_proc.take_lock(running)
    try:
        old = [record("local-1", 90, run_dir=str(running)), record("local-2", 90, run_dir=str(ended))]
        assert live_ids(old) == {"local-1"}
    finally:
        os.close(fd)
    assert live_ids(old) == set()


def test_no_append_is_lost_while_a_prune_rewrites(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    registry.add(record("1", 90))
    late = threading.Thread(target=registry.add, args=(record("2", 0),))
    with registry.locked(exclusive=True):
        late.start()
        time.sleep(0.3)
        assert late.is_alive()  # the append waits for the rewrite
        registry.rewrite([])
    late.join(timeout=10)
    assert [r.job_id for r in registry.records()] == ["2"]


def test_list_prune_from_the_cli(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    registry.add(JobRecord("local-1", "old", str(tmp_path / "gone"), "local", time.time() - 60 * DAY))
    registry.add(JobRecord("local-2", "new", str(tmp_path / "gone"), "local", time.time()))
    env = {**os.environ, "DDPCTL_HOME": str(tmp_path)}
    run = [sys.executable, "-m", "ddpctl", "list"]
    done = subprocess.run([*run, "--prune"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.startswith("pruned 1 record(s) of jobs that ended and were submitted more than 30 day(s) ago")
    assert [r.job_id for r in registry.records()] == ["local-2"]
    bad = subprocess.run(
        [*run, "--prune", "--older-than", "nan"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "--older-than: got 'nan', expected a number of days >= 0" in bad.stderr


@pytest.mark.parametrize("lines", [1, 100_000])
def test_completion_refs_are_newest_first_and_unique(lines: int) -> None:
    records = [JobRecord(str(n), f"name-{n % 7}", "/r", "sbatch", float(n)) for n in range(lines)]
    data = b"".join((json.dumps(r.__dict__, sort_keys=True) + "\n").encode() for r in records)
    data += b"not json\n" + (json.dumps(records[0].__dict__, sort_keys=True) + "\n").encode()
    refs = refs_in(data)
    names = [f"name-{n % 7}" for n in range(lines)]
    assert refs[:2] == ["name-0", "0"]  # the last line is the newest
    assert len(refs) == len(set(refs)) == lines + len(set(names))
    assert set(refs) == {str(n) for n in range(lines)} | set(names)


@pytest.mark.parametrize("block", [7, 64, 1000, 1 << 18])
@pytest.mark.parametrize(("prefix", "limit"), [("", 5), ("", 10_000), ("name-3", 3), ("1", 50), ("zzz", 5), ("9", 1)])
def test_refs_read_backwards_are_the_newest_of_the_whole_file(
    tmp_path: Path, block: int, prefix: str, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read from the end in blocks of any size (lines cut across blocks), the answer is the whole file's."""
    monkeypatch.setattr("ddpctl.run.registry.REFS_BLOCK", block)
    records = [JobRecord(str(n), f"name-{n % 7}", "/r", "sbatch", float(n)) for n in range(300)]
    data = b"".join((json.dumps(r.__dict__, sort_keys=True) + "\n").encode() for r in records)
    data += b"not json, no newline at the end"
    (tmp_path / "registry.jsonl").write_bytes(data)
    expected = [ref for ref in refs_in(data) if ref.startswith(prefix)][:limit]
    assert Registry(tmp_path).newest_refs(prefix, limit) == expected
    assert Registry(tmp_path / "absent").newest_refs(prefix, limit) == []


def test_a_pending_task_of_a_live_local_sweep_queue_is_live(tmp_path: Path) -> None:
    """`list --prune` dropped them, and the queue then started them unrecorded (invisible to list and cancel)."""
    home = tmp_path / "sweep-local-3"
    pending, done = tmp_path / "local-3_1", tmp_path / "local-3_0"
    for directory in (home, pending, done):
        directory.mkdir()
    local_proc.write_pid(done, 999_999)  # started (and ended: its lock is free)

    def task(run_dir: Path) -> JobRecord:
        return JobRecord(run_dir.name, "ex", str(run_dir), "local", NOW - 90 * DAY, sweep="local-3")

    queue = local_proc.take_lock(home)  # the queue lives
    try:
        assert live_ids([task(pending), task(done)]) == {"local-3_1"}
        registry = Registry(tmp_path / "home")
        for run_dir in (pending, done):
            registry.add(task(run_dir))
        assert prune(registry, NOW, 30 * DAY).dropped == 1
        assert [r.job_id for r in registry.records()] == ["local-3_1"]
    finally:
        os.close(queue)
    assert live_ids([task(pending), task(done)]) == set()  # the queue is gone: it never starts
