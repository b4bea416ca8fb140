"""A real Hugging Face Trainer run (tiny GPT-2 built from a config, data made here: nothing downloaded), 2 nodes x
2 ranks on the local backend, preempted mid-run (issue 42): `ddpctl.integrations.hf.StopCallback` saves
`checkpoint-<step>/` at the agreed step and exits 0 on every rank, and `resume: {preset: hf-trainer}` hands the
next attempt `--resume_from_checkpoint` of that checkpoint, so it continues from the step after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import preempt_trainer

pytest.importorskip("transformers")
pytestmark = pytest.mark.torchrun

HF_SCRIPT = """
import os, sys, time
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from ddpctl.integrations.hf import StopCallback

def arg(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 100000
    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}

class Pace(TrainerCallback):  # slow enough to be preempted mid-run; rank 0 prints each step
    def on_step_end(self, args, state, control, **kw):
        time.sleep(0.1)
        if os.environ.get("RANK") == "0":
            print(f"step {state.global_step}", flush=True)

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
args = TrainingArguments(
    output_dir=arg("--output_dir"), max_steps=int(arg("--max_steps")), per_device_train_batch_size=2,
    save_steps=25, save_total_limit=2, logging_steps=1000, report_to=[], use_cpu=True, disable_tqdm=True,
    dataloader_num_workers=0,
)
trainer = Trainer(model=model, args=args, train_dataset=Data(), callbacks=[Pace(), StopCallback()])
resume = arg("--resume_from_checkpoint")
if os.environ.get("RANK") == "0":
    print(f"resume_from_checkpoint={resume}", flush=True)
trainer.train(resume_from_checkpoint=resume)
if os.environ.get("RANK") == "0":
    print(f"finished at step {trainer.state.global_step}", flush=True)
"""


def rank0(run_dir: Path, attempt: int) -> list[str]:
    log = run_dir / f"attempt-{attempt}" / "rank-0.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(("step ", "resume_from", "finished"))]


def test_a_preempted_hf_trainer_saves_at_the_agreed_step_and_resumes_there(tmp_path: Path) -> None:
    args = ["--output_dir", "$DDPCTL_CKPT_DIR", "--max_steps", "120"]
    ran = preempt_trainer(
        tmp_path, "hf", HF_SCRIPT, args, "hf-trainer", ready=lambda d: "step 30" in rank0(d, 0), timeout=400
    )
    cli, job_id, status, run_dir, found, info = ran.cli, ran.job_id, ran.status, ran.run_dir, ran.events, ran.info
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, (status, info)
    stop = next(e for e in found if e["event"] == "stop")
    step = stop["step"]
    ckpt = run_dir / "checkpoints" / f"checkpoint-{step}"
    assert step > 30 and stop["checkpoint"] == str(ckpt), info
    decision = next(e for e in found if e["event"] == "decision")
    assert (decision["action"], decision["kind"], decision["cause"]) == ("requeue", "preemption", "stop"), info
    first, second = rank0(run_dir, 0), rank0(run_dir, 1)
    assert first[0] == "resume_from_checkpoint=None" and f"step {step}" == first[-1], first
    assert second[0] == f"resume_from_checkpoint={ckpt}", second
    assert second[1] == f"step {step + 1}" and second[-1] == "finished at step 120", second
    shown = cli.run("status", job_id).stdout
    assert f"attempt 1: resumed from step {step} ({ckpt}), given --resume_from_checkpoint {ckpt}" in shown, shown
