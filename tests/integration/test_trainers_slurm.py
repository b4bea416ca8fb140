"""The trainers on the real local cluster, as on the local backend (issue 42): the Hugging Face Trainer run of
test_hf_local.py, 2 nodes x 2 ranks in `debug2` (the second pair's lane), preempted with `ddpctl preempt` (the
signal reaches the ranks through the batch shell's fan-out to each node's launcher), saves `checkpoint-<step>/` at
the agreed step, is requeued by Slurm and resumes from it with the preset's `--resume_from_checkpoint`.

Then test_lightning_local.py's LightningCLI script as a user with a config file would run it: `fit --config
cfg.yaml` (the trainer's settings and the stop callback in the file, nothing ddpctl-specific on the command line)
and Lightning's default logger and checkpointing left on (each attempt logs to its own `lightning_logs/version_N`
under the config's `default_root_dir` and saves `epoch=E-step=S.ckpt` there, outside the checkpoint directory):
the stop's checkpoint goes to `$DDPCTL_CKPT_DIR`, the preset appends `--ckpt_path` after the config, and the
weights match the replay.

Slurm's side of a preemption is the same on both versions (tests/integration/test_preemption.py runs there): CI
runs this one on 22.05 only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clitools import preempt_trainer
from test_hf_local import HF_SCRIPT, rank0
from test_lightning_local import CLI_SCRIPT, distance, replay
from test_lightning_local import rank0 as lightning_rank0

pytest.importorskip("transformers")
pytestmark = [pytest.mark.slurm, pytest.mark.second_pair, pytest.mark.one_slurm_version, pytest.mark.torchrun]


def on_debug2(cleanup_jobs: Callable[[str], str]) -> dict[str, Any]:
    """preempt_trainer's arguments for a run on the second pair's partition, its job cleaned up after the test."""
    return {"backend": "sbatch", "fields": {"partition": "debug2", "time": "00:15:00"}, "submitted": cleanup_jobs}


def test_a_preempted_hf_trainer_resumes_there_on_slurm(tmp_path: Path, cleanup_jobs: Callable[[str], str]) -> None:
    args = ["--output_dir", "$DDPCTL_CKPT_DIR", "--max_steps", "80"]
    ran = preempt_trainer(
        tmp_path,
        "hf",
        HF_SCRIPT,
        args,
        "hf-trainer",
        ready=lambda d: "step 30" in rank0(d, 0),
        timeout=400,
        **on_debug2(cleanup_jobs),
    )
    status, run_dir, found, info = ran.status, ran.run_dir, ran.events, ran.info
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, (status, info)
    stop = next(e for e in found if e["event"] == "stop")
    step, ckpt = stop["step"], run_dir / "checkpoints" / f"checkpoint-{stop['step']}"
    assert step > 30 and stop["checkpoint"] == str(ckpt), info
    decision = next(e for e in found if e["event"] == "decision")
    assert (decision["action"], decision["kind"], decision["cause"]) == ("requeue", "preemption", "stop"), info
    # The same job again (Slurm's requeue), not a successor: one job id in both attempts' starts.
    starts = [e["job_id"] for e in found if e["event"] == "attempt-start"]
    assert starts == [ran.job_id, ran.job_id], info
    first, second = rank0(run_dir, 0), rank0(run_dir, 1)
    assert first[0] == "resume_from_checkpoint=None" and f"step {step}" == first[-1], first
    assert second[0] == f"resume_from_checkpoint={ckpt}", second
    assert second[1] == f"step {step + 1}" and second[-1] == "finished at step 80", second


LIGHTNING_CONFIG = """
trainer:
  accelerator: cpu
  devices: 2
  num_nodes: 2
  strategy: ddp
  precision: 64-true
  max_steps: 50
  enable_progress_bar: false
  enable_model_summary: false
  default_root_dir: {root}
  callbacks:
    - class_path: ddpctl.integrations.lightning.StopCallback
"""


def test_a_preempted_lightningcli_with_a_config_file_and_default_logger_resumes_on_slurm(
    tmp_path: Path, cleanup_jobs: Callable[[str], str]
) -> None:
    pytest.importorskip("jsonargparse")
    config = tmp_path / "cfg.yaml"
    config.write_text(LIGHTNING_CONFIG.format(root=tmp_path / "lightning"))  # its logs: not the submit directory
    ran = preempt_trainer(
        tmp_path,
        "litcfg",
        CLI_SCRIPT,
        ["fit", "--config", str(config)],
        "lightning",
        ready=lambda d: "step 7" in lightning_rank0(d, 0),
        timeout=400,
        **on_debug2(cleanup_jobs),
    )
    status, run_dir, found, info = ran.status, ran.run_dir, ran.events, ran.info
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, (status, info)
    stop = next(e for e in found if e["event"] == "stop")
    step, ckpt = stop["step"], run_dir / "checkpoints" / f"stop-step={stop['step']}.ckpt"
    assert step >= 7 and stop["checkpoint"] == str(ckpt), info
    first, second = lightning_rank0(run_dir, 0), lightning_rank0(run_dir, 1)
    assert first[0] == "ckpt_path=None sigusr1=default" and f"step {step}" == first[-1], first
    assert second[0] == f"ckpt_path={ckpt} sigusr1=default" and second[1] == f"step {step + 1}", second
    assert second[-1] == "finished at step 50", second
    launch = next(e for e in found if e["event"] == "launch" and e["attempt"] == 1)
    assert list(launch["argv"])[-4:] == ["--config", str(config), "--ckpt_path", str(ckpt)], launch
    weights = [float.fromhex(v) for v in json.loads(second[-2].removeprefix("weights "))]
    assert distance(weights, replay(50)) < 1e-6, (weights, replay(50))
