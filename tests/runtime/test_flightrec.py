"""The flight-recorder dump: a rank answers the watchdog's request once (runtime.flightrec), the watchdog waits for
the live ranks a bounded time (health.flightrec)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ddpctl.health import flightrec
from ddpctl.health.collectives import summarise
from ddpctl.run.layout import RunLayout
from ddpctl.runtime.flightrec import MAX_ENTRIES, Answerer, trim


def test_a_rank_answers_once_and_only_when_asked(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    answer = Answerer(layout.flight_record(0), layout.flight_record(0, 2), 2)
    answer.poll()
    assert not layout.flight_record(0, 2).exists()
    flightrec.request(layout, 0, "no rank progressed for 12 s")
    answer.poll()
    written = json.loads(layout.flight_record(0, 2).read_text())
    assert written["rank"] == 2 and ("entries" in written or "error" in written)
    layout.flight_record(0, 2).unlink()
    answer.poll()
    assert not layout.flight_record(0, 2).exists()  # once per attempt


def test_an_entry_is_trimmed_to_what_the_summary_reads() -> None:
    big = {"collective_seq_id": 5, "profiling_name": "gloo:all_reduce", "input_sizes": [[1]] * 100, "frames": [1] * 50}
    out = trim({**big, "process_group": ["0", "default_pg", "x"]})
    assert "frames" not in out and len(out["input_sizes"]) == 8 and out["process_group"] == ["0", "default_pg"]


def test_the_watchdog_waits_for_live_ranks_only_and_never_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    monkeypatch.setattr(flightrec, "WAIT_S", 0.5)
    flightrec.request(layout, 0, "hang")
    layout.flight_record(0, 0).write_text(json.dumps({"rank": 0, "entries": []}))
    start = time.monotonic()
    got = flightrec.collect(layout, 0, [0, 1, 2], expected=[0])
    assert time.monotonic() - start < 0.4 and got == {0: {"rank": 0, "entries": []}, 1: None, 2: None}
    start = time.monotonic()
    assert flightrec.collect(layout, 0, [0, 1], expected=[0, 1])[1] is None
    assert 0.2 <= time.monotonic() - start < 2  # rank 1 never answers: bounded


RANK = """
import os, sys, json, threading
os.environ["TORCH_FR_BUFFER_SIZE"] = "100"
import torch, torch.distributed as dist
from ddpctl.runtime.flightrec import Answerer
dist.init_process_group("gloo", init_method="file://" + sys.argv[1] + "/store", rank=0, world_size=1)
t = torch.ones(3)
for _ in range(3):
    dist.all_reduce(t)
dist.broadcast(torch.ones(2), 0)
answer = Answerer(__import__("pathlib").Path(sys.argv[1]) / "req", __import__("pathlib").Path(sys.argv[1]) / "out", 0)
open(sys.argv[1] + "/req", "w").close()
threading.Thread(target=answer.poll).start()  # as the heartbeat's thread does
"""


@pytest.mark.torchrun
def test_a_real_gloo_recorder_is_dumped_from_another_thread(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RANK), str(tmp_path)], check=False, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    dump = json.loads((tmp_path / "out").read_text())
    ops = [(e["collective_seq_id"], e["profiling_name"], e["input_sizes"]) for e in dump["entries"]]
    assert ops[-4:] == [
        (1, "gloo:all_reduce", [[3]]),
        (2, "gloo:all_reduce", [[3]]),
        (3, "gloo:all_reduce", [[3]]),
        (4, "gloo:broadcast", [[2]]),
    ]
    assert len(dump["entries"]) <= MAX_ENTRIES
    assert summarise({0: dump}).ranks["0"]["completed"]["seq"] >= 3
