"""requeue.mode: auto reads the real cluster's facts: JobRequeue (a cluster restarted with
DDPCTL_TEST_JOB_REQUEUE=0) and a partition's PreemptMode (lowprio: CANCEL)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from clitools import REPO, Cli
from slurmtools import START_SCRIPT

pytestmark = pytest.mark.slurm


def start_cluster(**env: str) -> None:
    done = subprocess.run(
        ["bash", str(START_SCRIPT)], capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **env}
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture
def no_requeue_cluster() -> Iterator[None]:
    start_cluster(DDPCTL_TEST_JOB_REQUEUE="0")  # restarts the daemons: the config changed
    try:
        yield
    finally:
        start_cluster()  # back to the default config for every other test


def dry_run(cli: Cli, *sets: str) -> str:
    options = [item for value in sets for item in ("--set", value)]
    return cli.run("submit", str(REPO / "jobs" / "example.yaml"), "--dry-run", *options).stdout


@pytest.mark.cluster_alone  # the daemons restart with another config
def test_auto_picks_chain_on_a_cluster_without_job_requeue(no_requeue_cluster: None, tmp_path: Path) -> None:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    assert any(line.split() == ["JobRequeue", "=", "0"] for line in config.splitlines()), config
    cli = Cli(tmp_path / "home")
    doctor = cli.run("doctor", str(REPO / "jobs" / "example.yaml"), check=False).stdout
    assert "[ok  ] requeue mode: chain (JobRequeue=0 in the cluster's config)" in doctor, doctor
    script = dry_run(cli)
    call = 'scontrol requeue "$requeue_id"'  # the command, not the comments that mention it
    # Chained: submitted --no-requeue; the job requeues itself only when its successor is refused, made
    # requeueable first (on this cluster that fails too, and the run ends there).
    fallback = 'if "${DDPCTL[@]}" internal chain-next "$RUN_DIR"; then exit "$status"; fi'
    made_requeueable = 'scontrol update JobId="$requeue_id" Requeue=1 || exit 1'
    assert "#SBATCH --no-requeue" in script and fallback in script, script
    assert script.index(fallback) < script.index(made_requeueable) < script.index(call), script
    plain = dry_run(cli, "requeue.mode=requeue")  # the spec's explicit choice wins
    assert call in plain and made_requeueable not in plain and "#SBATCH --requeue" in plain, plain
    submitit = cli.run("doctor", str(REPO / "jobs" / "example.yaml"), "--backend", "submitit", check=False).stdout
    assert "[FAIL] requeue mode:" in submitit and "submitit backend can only requeue" in submitit, submitit


def test_auto_on_the_default_cluster(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    doctor = cli.run("doctor", str(REPO / "jobs" / "example.yaml"), check=False).stdout
    assert (
        "requeue mode: requeue (JobRequeue=1, partition debug PreemptMode=REQUEUE; a failed scontrol "
        "requeue falls back to a chained job)" in doctor
    ), doctor
    # Before the requeue, only the successor after a lost node (ddpctl.node.chain).
    before = dry_run(cli).split('scontrol requeue "$requeue_id"')[0]
    assert before.count("internal chain-next") == 1 and 'if [ -e "$lost_file" ]; then' in before, before
    assert "--no-requeue" in dry_run(cli, "partition=lowprio")
