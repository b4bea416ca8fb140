"""Checkpointer in one process (world size 1): atomicity, keep-N, damaged checkpoints, background save."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from clitools import events as records

from ddpctl.runtime import RANK_KEY, Checkpointer
from ddpctl.runtime.ckptowner import SharedCheckpointDir
from ddpctl.runtime.dist import DistContext

SOLO = DistContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"), attempt=0, distributed=False)


def state(step: int) -> dict[str, object]:
    return {"w": torch.full((64,), float(step)), "step": step, RANK_KEY: {"rng": torch.tensor([step, 7])}}


def make(tmp_path: Path, keep: int = 3) -> Checkpointer:
    return Checkpointer(tmp_path / "ckpt", keep=keep, ctx=SOLO, env={"DDPCTL_RUN_DIR": str(tmp_path)})


def steps_on_disk(tmp_path: Path, *savers: Checkpointer) -> list[str]:
    """The step directories, once the savers' retention (which runs beside training after a save) is done."""
    for saver in savers:
        saver.wait()
    return sorted(p.name for p in (tmp_path / "ckpt").iterdir())


def test_roundtrip_and_layout(tmp_path: Path) -> None:
    ckpt = make(tmp_path)
    path = ckpt.save(5, state(5))
    assert sorted(p.name for p in path.iterdir()) == ["COMPLETE", "OWNER", "rank-0.json", "rank-0.pt", "shared.pt"]
    marker = json.loads((path / "COMPLETE").read_text())
    assert marker["step"] == 5
    assert set(marker["files"]) == {"shared.pt", "rank-0.pt"}
    found = ckpt.load_latest()
    assert found is not None
    step, loaded = found
    assert step == 5
    assert torch.equal(loaded["w"], torch.full((64,), 5.0))
    assert torch.equal(loaded[RANK_KEY]["rng"], torch.tensor([5, 7]))
    torch.load(path / "shared.pt", weights_only=True)  # plain tensors and ints only


def test_empty_directory_has_no_checkpoint(tmp_path: Path) -> None:
    assert make(tmp_path).load_latest() is None


def test_keeps_only_the_newest_complete(tmp_path: Path) -> None:
    ckpt = make(tmp_path, keep=2)
    for step in (1, 2, 3, 4):
        ckpt.save(step, state(step))
    assert steps_on_disk(tmp_path, ckpt) == ["step-000000003", "step-000000004"]
    assert ckpt.latest_step() == 4


def test_keep_zero_keeps_everything(tmp_path: Path) -> None:
    ckpt = make(tmp_path, keep=0)
    for step in (1, 2, 3):
        ckpt.save(step, state(step))
    assert len(steps_on_disk(tmp_path, ckpt)) == 3


def damage_truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def damage_garbage(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes(b"\x00garbage" * (size // 8) + b"x" * (size % 8))  # same size, wrong content


def damage_no_marker(path: Path) -> None:
    (path.parent / "COMPLETE").unlink()


def damage_marker_garbage(path: Path) -> None:
    (path.parent / "COMPLETE").write_text("{not json")


@pytest.mark.parametrize("damage", [damage_truncate, damage_garbage, damage_no_marker, damage_marker_garbage])
@pytest.mark.parametrize("victim", ["shared.pt", "rank-0.pt"])
def test_damaged_latest_falls_back_with_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, victim: str
) -> None:
    ckpt = make(tmp_path)
    ckpt.save(10, state(10))
    latest = ckpt.save(20, state(20))
    damage(latest / victim)  # type: ignore[operator]
    found = ckpt.load_latest()
    assert found is not None
    assert found[0] == 10
    assert torch.equal(found[1]["w"], torch.full((64,), 10.0))
    assert "WARNING: skipping checkpoint" in capsys.readouterr().err
    skipped = [e for e in records(tmp_path) if e["event"] == "checkpoint_skipped"]
    assert [e["step"] for e in skipped] == [20]


def test_all_damaged_means_none(tmp_path: Path) -> None:
    ckpt = make(tmp_path)
    damage_truncate(ckpt.save(1, state(1)) / "shared.pt")
    assert ckpt.load_latest() is None


def test_save_after_resuming_from_older_drops_the_abandoned_newer(tmp_path: Path) -> None:
    ckpt = make(tmp_path, keep=1)
    ckpt.save(10, state(10))
    damage_truncate(ckpt.save(20, state(20)) / "shared.pt")
    ckpt.load_latest()  # resumes from 10; the damaged 20 would otherwise count as "newest"
    ckpt.save(12, state(12))
    assert steps_on_disk(tmp_path, ckpt) == ["step-000000012"]


def test_a_faster_ranks_next_save_survives_the_commit_of_this_one(tmp_path: Path) -> None:
    # With background saves a faster rank makes the next step's directory (and claims it) while rank 0 still
    # commits this one; its prune took that directory for an abandoned timeline and deleted it under the rank
    # ("cannot write checkpoint file .../step-000000006/OWNER: No such file or directory", seen under podman).
    ckpt = make(tmp_path)
    assert ckpt.load_latest() is None
    ckpt.save(2, state(2))
    ahead = tmp_path / "ckpt" / "step-000000006"
    ahead.mkdir()
    (ahead / "OWNER").write_text(json.dumps({"owner": ckpt._owner}))
    ckpt.save(4, state(4))
    assert steps_on_disk(tmp_path, ckpt) == ["step-000000002", "step-000000004", "step-000000006"]


def test_incomplete_leftovers_are_removed_after_the_next_complete_save(tmp_path: Path) -> None:
    ckpt = make(tmp_path)
    leftover = tmp_path / "ckpt" / "step-000000003"
    leftover.mkdir(parents=True)
    (leftover / "shared.pt").write_bytes(b"partial")
    ckpt.save(4, state(4))
    assert steps_on_disk(tmp_path, ckpt) == ["step-000000004"]


def test_background_save_is_complete_after_wait(tmp_path: Path) -> None:
    ckpt = make(tmp_path)
    live = state(7)
    path = ckpt.save(7, live, blocking=False)
    weights = live["w"]
    assert isinstance(weights, torch.Tensor)
    weights.fill_(-1.0)  # the snapshot must not see this
    ckpt.wait()
    assert (path / "COMPLETE").exists()
    found = ckpt.load_latest()
    assert found is not None
    assert torch.equal(found[1]["w"], torch.full((64,), 7.0))


def test_background_save_error_surfaces_in_wait(tmp_path: Path) -> None:
    ckpt = make(tmp_path)
    bad = state(1)
    bad["fn"] = lambda: None  # not picklable: fails on the writer thread
    path = ckpt.save(1, bad, blocking=False)
    with pytest.raises(RuntimeError, match="background checkpoint save failed"):
        ckpt.wait()
    assert not (path / "COMPLETE").exists()
    assert ckpt.load_latest() is None


def test_defaults_come_from_the_environment(tmp_path: Path) -> None:
    env = {"DDPCTL_CKPT_DIR": str(tmp_path / "c"), "DDPCTL_CKPT_KEEP": "5"}
    ckpt = Checkpointer(ctx=SOLO, env=env)
    assert (ckpt.dir, ckpt.keep) == (tmp_path / "c", 5)
    fallback = Checkpointer(ctx=SOLO, env={"DDPCTL_RUN_DIR": str(tmp_path)})
    assert (fallback.dir, fallback.keep) == (tmp_path / "checkpoints", 3)


def other_run(tmp_path: Path, name: str, keep: int = 3) -> Checkpointer:
    return Checkpointer(tmp_path / "ckpt", keep=keep, ctx=SOLO, env={"DDPCTL_RUN_DIR": str(tmp_path / name)})


def test_retention_never_deletes_another_runs_checkpoints(tmp_path: Path) -> None:
    first = other_run(tmp_path, "run-a")
    for step in (4, 8, 12):
        first.save(step, state(step))
    first.wait()  # that run has ended (its retention with it) before the next one starts
    second = other_run(tmp_path, "run-b", keep=1)
    for step in (1, 2, 3):  # a fresh run that never resumed: its steps are below the other run's
        second.save(step, state(step))
    assert steps_on_disk(tmp_path, first, second) == [
        "step-000000003",
        "step-000000004",
        "step-000000008",
        "step-000000012",
    ]


def test_saving_over_another_runs_step_is_refused(tmp_path: Path) -> None:
    other_run(tmp_path, "run-a").save(4, state(4))
    with pytest.raises(SharedCheckpointDir, match=r"step-000000004 belongs to another run"):
        other_run(tmp_path, "run-b").save(4, state(40))
    found = other_run(tmp_path, "run-a").load_latest()
    assert found is not None and found[1]["step"] == 4


def test_the_checkpoint_resumed_from_is_adopted_by_retention(tmp_path: Path) -> None:
    first = other_run(tmp_path, "run-a")
    for step in (4, 8, 12):
        first.save(step, state(step))
    first.wait()  # that run has ended (its retention with it) before the next one starts
    second = other_run(tmp_path, "run-b", keep=2)
    found = second.load_latest()
    assert found is not None and found[0] == 12
    for step in (13, 14):
        second.save(step, state(step))
    assert steps_on_disk(tmp_path, first, second) == [
        "step-000000004",
        "step-000000008",
        "step-000000013",
        "step-000000014",
    ]


def test_another_world_size_in_the_directory_is_refused_loudly(tmp_path: Path) -> None:
    other_run(tmp_path, "run-a").save(4, state(4))
    marker = tmp_path / "ckpt" / "step-000000004" / "COMPLETE"
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "world_size": 4}))  # as a 4-rank run left it
    with pytest.raises(SharedCheckpointDir, match=r"shared with another run .*saved by 4 ranks of another run"):
        other_run(tmp_path, "run-b").load_latest()
    assert steps_on_disk(tmp_path) == ["step-000000004"]


FULL_DISK = """
import resource, signal, sys, torch
from pathlib import Path
from ddpctl.runtime import Checkpointer
from ddpctl.runtime.dist import DistContext
solo = DistContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"), attempt=0, distributed=False)
here = Path(sys.argv[1])
ckpt = Checkpointer(here / "ckpt", keep=3, ctx=solo, env={"DDPCTL_RUN_DIR": str(here)})
ckpt.save(1, {"w": torch.zeros(10), "rank": {}})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, like a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
ckpt.save(2, {"w": torch.zeros(1_000_000), "rank": {}})
"""


def test_a_failed_save_removes_its_partial_files_and_names_the_path(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "CheckpointWriteError" in last and "step-000000002/shared.pt: File too large" in last, done.stderr
    left = sorted(str(p.relative_to(tmp_path / "ckpt")) for p in (tmp_path / "ckpt").rglob("*"))
    assert [p for p in left if "tmp" in p or p.startswith("step-000000002")] == [], left
    found = make(tmp_path).load_latest()
    assert found is not None and found[0] == 1
