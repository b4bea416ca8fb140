"""The cluster's code store is bounded (ddpctl.remote.storegc, issue 43: three dry runs of a 10 MB repository grew
it from 480 KB to 68 MB): the tree in use, the trees live runs name and the newest few stay with their objects;
the rest goes, and the request's answer says what was freed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ddpctl.cli.remote_internal import with_freed
from ddpctl.remote.receive import home, store_of
from ddpctl.remote.storegc import GRACE_S, KEEP_TREES, prune, using
from ddpctl.remote.trees import tree
from ddpctl.run.registry import JobRecord
from ddpctl.snapshot.copy import Item, Resolved
from ddpctl.snapshot.store import object_path, put


def later() -> float:
    """A moment at which every object made so far is past its grace (taken at the call: a constant taken at import
    was only 20 minutes ahead of objects made 100 minutes into a slow suite, and kept them)."""
    return time.time() + 2 * GRACE_S


def build(tmp_path: Path, cluster: Path, store: Path, n: int) -> tuple[list[Item], Path]:
    source = tmp_path / "src" / f"v{n}.py"
    source.parent.mkdir(exist_ok=True)
    data = f"VERSION = {n}\n".encode() * 1000
    source.write_bytes(data)
    items = [Item("train.py", "file", 0o644, put(store, source, len(data)), len(data))]
    made = tree(store, items, cluster)
    os.utime(made, (1000.0 + n, 1000.0 + n))  # built (or used) in this order
    return items, made


def ended(run_dir: Path, tree_path: Path, final: bool) -> JobRecord:
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(f"name: far\nscript: {tree_path}/train.py\n")
    decision = {"event": "decision", "attempt": 0, "action": "finish" if final else "requeue", "exit_code": 0}
    (run_dir / "events.jsonl").write_text(json.dumps(decision) + "\n")
    return JobRecord(run_dir.name, "far", str(run_dir), "local", 0.0)


def test_the_store_keeps_the_tree_in_use_the_live_runs_and_the_newest(tmp_path: Path) -> None:
    cluster = tmp_path / "home" / "remote"
    store = store_of({"DDPCTL_HOME": str(tmp_path / "home")})
    built = [build(tmp_path, cluster, store, n) for n in range(7)]
    live = ended(tmp_path / "runs" / "1", built[1][1], final=False)
    done = ended(tmp_path / "runs" / "2", built[2][1], final=True)
    freed = prune(cluster, store, built[0][1].name, [live, done], now=later())
    assert freed is not None
    kept = {0, 1, *range(7 - KEEP_TREES, 7)}  # in use, a live run's, the newest
    assert sorted(p.name for p in (cluster / "trees").iterdir()) == sorted(built[n][1].name for n in kept)
    for n, (items, _) in enumerate(built):
        assert object_path(store, items[0].ref).exists() == (n in kept), n
    assert (freed.trees, freed.objects, freed.kept) == (2, 2, 5)
    assert freed.line() == "code store: freed 2 code trees and 2 objects (0.0 MB) on the cluster; 5 trees kept"
    assert prune(cluster, store, built[0][1].name, [live], now=later()) == type(freed)(0, 0, 0, 5)


def test_a_young_object_stays_for_the_submission_it_was_sent_for(tmp_path: Path) -> None:
    cluster = tmp_path / "home" / "remote"
    store = store_of({"DDPCTL_HOME": str(tmp_path / "home")})
    items, made = build(tmp_path, cluster, store, 0)
    source = tmp_path / "sent.py"
    source.write_bytes(b"sent, its tree not built yet\n")
    oid = put(store, source, source.stat().st_size)
    assert prune(cluster, store, made.name, [], now=time.time()) is not None
    assert object_path(store, oid).exists()
    assert prune(cluster, store, made.name, [], now=later()) is not None
    assert not object_path(store, oid).exists() and object_path(store, items[0].ref).exists()


def test_nothing_is_pruned_while_another_request_uses_the_store(tmp_path: Path) -> None:
    cluster = tmp_path / "home" / "remote"
    store = store_of({"DDPCTL_HOME": str(tmp_path / "home")})
    built = [build(tmp_path, cluster, store, n) for n in range(KEEP_TREES + 2)]
    with using(cluster):
        assert prune(cluster, store, built[-1][1].name, [], now=later()) is None
    assert len(list((cluster / "trees").iterdir())) == KEEP_TREES + 2


def test_a_requests_answer_says_what_was_freed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    store = store_of()
    built = [build(tmp_path, home(), store, n) for n in range(KEEP_TREES + 2)]
    for path in (store / "objects").rglob("*"):
        if path.is_file():
            os.utime(path, (1.0, 1.0))  # sent long ago
    items = built[-1][0]
    request = {"tree": [[i.path, i.kind, i.mode, i.ref, i.size] for i in items]}
    assert Resolved(items, 0).tree_id == built[-1][1].name
    outcome = with_freed({"ok": True, "job_id": "7", "notes": ["earlier"]}, request)
    assert outcome == {  # a note beside the outcome's fields, which stay as the submission gave them
        "ok": True,
        "job_id": "7",
        "notes": [
            "earlier",
            f"code store: freed 2 code trees and 2 objects (0.0 MB) on the cluster; {KEEP_TREES} trees kept",
        ],
    }
    assert with_freed({"ok": False, "missing": ["x"]}, request) == {"ok": False, "missing": ["x"]}
    assert with_freed({"ok": False, "error": "e"}, {"tree": [["?"]]}) == {"ok": False, "error": "e"}
