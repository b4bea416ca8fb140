"""The trainers on the real local cluster, as on the local backend (issue 42): the Hugging Face Trainer run of
test_hf_local.py, 2 nodes x 2 ranks in `debug2` (the second pair's lane), preempted with `ddpctl preempt` (the
signal reaches the ranks through the batch shell's fan-out to each node's launcher), saves `checkpoint-<step>/` at
the agreed step, is requeued by Slurm and resumes from it with the preset's `--resume_from_checkpoint`.

Slurm's side of a preemption is the same on both versions (tests/integration/test_preemption.py runs there): CI
runs this one on 22.05 only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import preempt_trainer
from test_hf_local import HF_SCRIPT, rank0

pytest.importorskip("transformers")
pytestmark = [pytest.mark.slurm, pytest.mark.second_pair, pytest.mark.one_slurm_version, pytest.mark.torchrun]


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
        backend="sbatch",
        fields={"partition": "debug2", "time": "00:15:00"},
        submitted=cleanup_jobs,
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
