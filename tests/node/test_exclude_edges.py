"""Never go back to a bad node, at the edges: the rendered batch script's requeue path EXECUTED by bash with stub
srun/scontrol on PATH (the real `python -m ddpctl internal ...` commands run), a chained successor's sbatch through
a recording Runner (our seam), and the decision recording the exclusion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml
from stubtools import RECORDING_STUB, on_path, recorded_argv, write_command

from ddpctl.node import batch, chain
from ddpctl.plan.render import RenderInputs, render_script
from ddpctl.proc import Completed
from ddpctl.run.layout import RunLayout
from ddpctl.spec import load_spec, resolve_paths, spec_to_mapping

# Slurm signals every process of the job once `scontrol requeue` went through: the stub does the same to the
# batch shell's process group before it returns (the worst case: TERM before the shell's next command).
SCONTROL = """trap '' TERM
if [ "$1" = requeue ]; then kill -TERM -- -"$(ps -o pgid= $$ | tr -d ' ')"; fi
exit 0
"""
EXCLUDED = {"event": "node-excluded", "attempt": 0, "node": "n9", "cause": "script-error", "why": "twice"}


def prepare(tmp_path: Path, mode: str) -> Path:
    write_command(tmp_path / "bin", "srun", RECORDING_STUB)
    write_command(tmp_path / "bin", "scontrol", RECORDING_STUB + SCONTROL)
    (tmp_path / "train.py").write_text("")
    spec_file = tmp_path / "spec.yaml"
    fields = {"name": "c", "script": "train.py", "run_dir": "runs", "requeue": {"mode": mode}}
    spec_file.write_text(yaml.safe_dump({**fields, "sbatch": {"exclude": "z1"}}))
    spec = resolve_paths(load_spec(spec_file, check_paths=False), tmp_path)
    run_dir = tmp_path / "runs" / "c" / "4242"
    (run_dir / "attempt-1").mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))
    (run_dir / "job.sbatch").write_text(
        render_script(spec, RenderInputs(run_base=run_dir.parent, python=sys.executable))
    )
    (run_dir / "events.jsonl").write_text(json.dumps(EXCLUDED) + "\n")
    (run_dir / "excluded-nodes").write_text("z1\nn9\n")
    return run_dir


def test_the_requeue_path_sets_the_runs_excluded_nodes_just_after_scontrol_requeue(tmp_path: Path) -> None:
    run_dir = prepare(tmp_path, "requeue")
    (run_dir / "attempt-1" / "stopped.json").write_text('{"step": 3}')  # attempt 1 stopped for a requeue
    env = {**os.environ, "PATH": on_path(tmp_path / "bin"), "STUB_OUT": str(tmp_path / "out")}
    env.update({"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1"})
    done = subprocess.run(
        ["bash", str(run_dir / "job.sbatch")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a shell that missed the requeue's TERM would wait out its `sleep 300`
        check=False,
        start_new_session=True,  # the stub signals this process group, never the test runner's
    )
    out = tmp_path / "out"
    assert recorded_argv(out, "scontrol", 0) == ["requeue", "4242"], done.stderr
    # The stub's second call (its files count both argv and env): the spec's own exclude first (an update
    # replaces the job's list), then the run's.
    assert recorded_argv(out, "scontrol", 2) == ["update", "JobId=4242", "ExcNodeList=z1,n9"], done.stderr
    assert "ExcNodeList=z1,n9" in done.stderr


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(list(argv))
        return Completed(tuple(argv), 0, "77\n", "")


def test_a_chained_successor_is_submitted_with_the_runs_excluded_nodes(tmp_path: Path) -> None:
    layout = RunLayout(prepare(tmp_path, "chain"))
    runner = Recorder()
    env = {"SLURM_JOB_ID": "10", "DDPCTL_CHAIN_ATTEMPT": "1"}
    assert chain.submit_successor(layout, env, "requeue decision", runner) == "77"
    assert "--exclude=z1,n9" in runner.calls[0]  # replaces the script's own #SBATCH --exclude: merged


def test_a_decision_to_requeue_a_second_failure_on_one_node_excludes_it(tmp_path: Path) -> None:
    layout = RunLayout(prepare(tmp_path, "requeue"))
    (layout.root / "excluded-nodes").unlink()
    own_error = {"event": "rank-exit", "rank": 1, "node": "n5", "status": 1, "error": "SystemExit: this node is bad"}
    failed = [
        {**own_error, "attempt": 0},
        {"event": "node-exit", "node": "n5", "attempt": 0, "exit": 1},
        {"event": "decision", "attempt": 0, "action": "requeue", "kind": "failure", "cause": "script-error"}
        | {"cause_node": "n5", "cause_rank": 1},
        {**own_error, "attempt": 1},
        {"event": "node-exit", "node": "n5", "attempt": 1, "exit": 1},
    ]
    layout.events.write_text("".join(json.dumps(e) + "\n" for e in failed))
    env = {"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1", "DDPCTL_LOCAL": "1"}  # local: no partition to ask
    policy = {"max_failures": 3}
    spec = yaml.safe_load((layout.root / "job.yaml").read_text())
    (layout.root / "job.yaml").write_text(yaml.safe_dump({**spec, "requeue": {**spec["requeue"], **policy}}))
    assert batch.decide_run(layout, env, 1).action == "requeue"
    records = [json.loads(line) for line in layout.events.read_text().splitlines()]
    assert [(e["node"], e["cause"], e["attempt"], e["applied"]) for e in records if e["event"] == "node-excluded"] == [
        ("n5", "script-error", 1, True)
    ]
    assert (layout.root / "excluded-nodes").read_text() == "z1\nn5\n"


def test_a_node_name_a_rank_wrote_that_is_not_one_of_the_jobs_nodes_is_never_excluded(tmp_path: Path) -> None:
    """A comma in a node name the job wrote went to ExcNodeList as nine nodes of a ten-node partition."""
    layout = RunLayout(prepare(tmp_path, "requeue"))
    (layout.root / "excluded-nodes").unlink()
    nine = ",".join(f"n{i}" for i in range(1, 10))
    own_error = {"event": "rank-exit", "rank": 1, "node": nine, "status": 1, "error": "SystemExit: bad"}
    failed = [
        {**own_error, "attempt": 0},
        {"event": "node-exit", "node": nine, "attempt": 0, "exit": 1},
        {"event": "decision", "attempt": 0, "action": "requeue", "kind": "failure", "cause": "script-error"}
        | {"cause_node": nine, "cause_rank": 1},
        {**own_error, "attempt": 1},
        {"event": "node-exit", "node": nine, "attempt": 1, "exit": 1},
    ]
    layout.events.write_text("".join(json.dumps(e) + "\n" for e in failed))
    env = {"SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1", "DDPCTL_LOCAL": "1", "SLURM_JOB_NODELIST": "n[1-2]"}
    spec = yaml.safe_load((layout.root / "job.yaml").read_text())
    (layout.root / "job.yaml").write_text(yaml.safe_dump({**spec, "requeue": {**spec["requeue"], "max_failures": 3}}))
    assert batch.decide_run(layout, env, 1).action == "requeue"
    records = [json.loads(line) for line in layout.events.read_text().splitlines()]
    excluded = [e for e in records if e["event"] == "node-excluded"]
    assert [(e["node"], e["applied"]) for e in excluded] == [(nine, False)]
    assert "is not a node name" in excluded[0]["why"]
    assert not (layout.root / "excluded-nodes").exists()
