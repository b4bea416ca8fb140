"""Which node a rank ran on: the worker records it (rank-<r>.json) and `ddpctl logs` trusts that over the
launcher's guess, since under c10d rendezvous torchrun orders nodes by address, not by SLURM_NODEID."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ddpctl.logs.files import read_node_map


def test_worker_records_its_placement(tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("print('hi')\n")
    env = {
        **os.environ,
        "RANK": "3",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "0",
        "DDPCTL_NODE": "node7",
        "DDPCTL_RANK_LOG_PATTERN": str(tmp_path / "attempt-0" / "rank-{rank}.log"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "ddpctl.node.worker", str(script)], env=env, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    info = json.loads((tmp_path / "attempt-0" / "rank-3.json").read_text())
    pid, main_thread = info.pop("pid"), info.pop("main_thread")  # whom the hang watchdog signals for a dump
    assert isinstance(pid, int) and pid > 0 and isinstance(main_thread, int)
    # process_group: whether torch.distributed made a default group (it never does here: the no-group warning)
    assert info == {"rank": 3, "local_rank": 1, "group_rank": 0, "node": "node7", "process_group": False}
    assert "hi" in (tmp_path / "attempt-0" / "rank-3.log").read_text()


def test_worker_placement_overrides_the_launcher_guess(tmp_path: Path) -> None:
    # The launcher on node2 (SLURM_NODEID 1) guessed ranks 2,3, but c10d gave node2 the ranks 0,1.
    (tmp_path / "node-0.json").write_text(json.dumps({"node": "node10", "node_rank": 0, "ranks": [0, 1]}))
    (tmp_path / "node-1.json").write_text(json.dumps({"node": "node2", "node_rank": 1, "ranks": [2, 3]}))
    for rank, node in ((0, "node2"), (1, "node2"), (2, "node10"), (3, "node10")):
        (tmp_path / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, "node": node}))
    merged: dict[int, str] = {}
    for ranks in read_node_map(tmp_path).values():
        merged.update(ranks)
    assert merged == {0: "node2", 1: "node2", 2: "node10", 3: "node10"}


def test_launcher_without_known_ranks_and_half_written_files(tmp_path: Path) -> None:
    (tmp_path / "node-0.json").write_text(json.dumps({"node": "node1", "node_rank": 0, "ranks": []}))
    (tmp_path / "rank-0.json").write_text('{"rank": 0, "no')  # being written
    (tmp_path / "rank-1.json").write_text(json.dumps({"rank": 1, "node": "node1"}))
    merged: dict[int, str] = {}
    for ranks in read_node_map(tmp_path).values():
        merged.update(ranks)
    assert merged == {1: "node1"}
