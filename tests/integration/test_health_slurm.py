"""Hang watchdog and straggler detection of the example job on the real local Slurm cluster (2 nodes x 2 ranks).

The reference weights come from the uninterrupted run on the local backend (as in test_preemption: training is
deterministic across backends).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import REPO, Cli, events, final_hash

from ddpctl.health.stacks import DUMP_MARK

pytestmark = pytest.mark.slurm

SPEC = REPO / "jobs" / "example.yaml"
TRAIN = ["--epochs", "2", "--steps-per-epoch", "6", "--ckpt-every", "2"]
HANG_TIMEOUT_S = 20


def submit(
    cli: Cli, runs: Path, *train: str, sets: tuple[str, ...] = (), backend: str | None = None
) -> tuple[str, Path]:
    options = ["--set", f"run_dir={runs}", "--set", f"args={json.dumps([*TRAIN, *train])}"]
    for item in sets:
        options += ["--set", item]
    return cli.submit(SPEC, *options, *(["--backend", backend] if backend else []))


@pytest.mark.one_slurm_version  # the watchdog's own judgement; the requeue is every preemption test's
def test_hidden_stall_on_slurm_is_dumped_named_requeued_and_resumed(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home")
    ref_id, ref_dir = submit(cli, tmp_path / "ref", sets=("name=reference",), backend="local")  # its own name
    job_id, run_dir = submit(
        cli,
        tmp_path / "runs",
        "--hang-at-step",
        "5",
        "--hang-rank",
        "2",
        sets=(f"health.hang_timeout_s={HANG_TIMEOUT_S}",),
    )
    cleanup_jobs(job_id)
    status = cli.wait_terminal(job_id, timeout=480)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), events(run_dir)
    assert cli.wait_terminal(ref_id, timeout=300)["state"] == "COMPLETED"
    assert final_hash(run_dir) is not None and final_hash(run_dir) == final_hash(ref_dir)
    hangs = [e for e in events(run_dir) if e["event"] == "hang"]
    assert len(hangs) == 1 and [(c["rank"], c["step"]) for c in hangs[0]["culprits"]] == [(2, 5)], hangs
    last = max(json.loads(p.read_text())["t"] for p in (run_dir / "attempt-0").glob("progress-*.json"))
    latency = hangs[0]["t"] - last
    print(f"slurm: hang detected {latency:.1f} s after the last progress (timeout {HANG_TIMEOUT_S} s)")
    assert HANG_TIMEOUT_S <= latency <= HANG_TIMEOUT_S + 10
    for rank in range(4):
        log = (run_dir / "attempt-0" / f"rank-{rank}.log").read_text()
        assert "(most recent call first)" in log.split(DUMP_MARK)[-1], f"rank {rank} has no stack dump"
    assert "in inject_delays" in (run_dir / "attempt-0" / "rank-2.log").read_text().split(DUMP_MARK)[-1]
    assert [(e["action"], e["kind"]) for e in events(run_dir) if e["event"] == "decision"] == [
        ("requeue", "node_failure"),  # requeue.max_node_failures (5), though max_failures is 0
        ("finish", None),
    ]
    assert "stopped first: rank 2 on node" in cli.run("logs", job_id, "--errors", "--attempt", "0").stdout


@pytest.mark.one_slurm_version  # the watchdog's own judgement, no Slurm call: CI runs it on 22.05 only
def test_slowed_rank_on_slurm_is_named_a_straggler(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home")
    job_id, run_dir = submit(
        # Rank 3 is busy 2 s more than the others' c per step; flagged while 2 + c > 1.5 c, i.e. c < 4 s. Four
        # ranks share the test cluster's two cores, so c grows with whatever else the machine runs: with factor 2
        # (c < 2 s) a full test suite running beside it once hid rank 3 (24.11, load 10).
        cli,
        tmp_path / "runs",
        "--slow-rank",
        "3",
        "--slow-s",
        "2",
        sets=("health.straggler_steps=5", "health.straggler_factor=1.5"),
    )
    cleanup_jobs(job_id)
    status = cli.wait_terminal(job_id, timeout=400)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 0), events(run_dir)
    stragglers = [e for e in events(run_dir) if e["event"] == "straggler"]
    assert [e["rank"] for e in stragglers] == [3], stragglers
    assert "straggler in attempt 0: rank 3 on node" in cli.run("status", job_id).stdout


# Rank 0 evaluates 10 s while the others wait at a barrier; the hang floor is scaled down to 6 s (the old default
# 120 s against a 150 s evaluation). Small steps keep the derived allowance (10 x the median step) below the floor.
EVAL = ["--epochs", "1", "--samples", "256", "--batch-size", "8", "--accum", "1", "--sleep-per-step", "0.1"]
EVAL += ["--eval-at-step", "4", "--eval-s", "10"]


@pytest.mark.one_slurm_version  # the watchdog's own judgement, no Slurm call: CI runs it on 22.05 only
def test_eval_pause_on_slurm_declared_is_no_hang_undeclared_is_a_restart(tmp_path: Path, cleanup_jobs) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home")
    floor = ("health.hang_floor_s=6", "name=declared")
    declared_id, declared_dir = submit(cli, tmp_path / "declared", *EVAL, sets=floor)
    silent_id, silent_dir = submit(cli, tmp_path / "silent", *EVAL, "--eval-undeclared", sets=(floor[0], "name=silent"))
    cleanup_jobs(declared_id)
    cleanup_jobs(silent_id)
    status = cli.wait_terminal(declared_id, timeout=400)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 0), events(declared_dir)
    assert [e for e in events(declared_dir) if e["event"] == "hang"] == []
    status = cli.wait_terminal(silent_id, timeout=400)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1), events(silent_dir)
    hangs = [e for e in events(silent_dir) if e["event"] == "hang"]
    assert [(c["rank"], c["step"]) for c in hangs[0]["culprits"]] == [(0, 4)] and len(hangs) == 1, hangs
    assert [(e["action"], e["kind"]) for e in events(silent_dir) if e["event"] == "decision"] == [
        ("requeue", "node_failure"),
        ("finish", None),
    ]
