"""Issue 42's table, the Hugging Face row, re-run: an unmodified public `run_clm.py` (transformers' causal-LM
example, which has no stop handler and resumes only with `--resume_from_checkpoint`) on the local backend, 2 nodes x
2 ranks, `resume: {preset: hf-trainer}`, preempted mid-run, against the same run uninterrupted.

Prints what each run ended as, what attempt 1 resumed from (status's own line), and whether both runs end with the
same weights (`model.safetensors`). Nothing is downloaded: a GPT-2 from a config, a word-level tokenizer and a
text file made here. run_clm.py is not in this repository: pass its path (examples/pytorch/language-modeling/ of
transformers). `--python` is an interpreter with transformers, datasets and evaluate (run_clm imports them all).

    python benchmarks/trainers_table.py --run-clm PATH/run_clm.py --python VENV/bin/python
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

WORDS = ("the", "a", "model", "trains", "on", "words", "and", "stops", "then", "resumes", "from", "its", "newest")
CONFIG = "n_embd=32,n_layer=2,n_head=2,n_positions=64"
TRAINING = (
    "--save_steps 50 --save_total_limit 2 --per_device_train_batch_size 4 --block_size 32 --use_cpu"
    " --ddp_backend gloo --logging_steps 10 --report_to none --seed 0"
)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "BUDGET_SPENT", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok.train([sys.argv[1]], trainers.WordLevelTrainer(special_tokens=["[UNK]", "[EOS]"]))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]", model_max_length=64)
fast.save_pretrained(sys.argv[2])
print(len(fast))
"""


def spec_for(work: Path, run_clm: Path, python: str, vocab: int, steps: int) -> dict[str, object]:
    return {
        "name": "clm",
        "script": str(run_clm),
        "args": [
            *shlex.split(f"--model_type gpt2 --config_overrides {CONFIG},vocab_size={vocab}"),
            *["--tokenizer_name", str(work / "tok"), "--train_file", str(work / "train.txt")],
            *shlex.split(f"--do_train --output_dir $DDPCTL_CKPT_DIR --max_steps {steps} {TRAINING}"),
        ],
        "nodes": 2,
        "nproc_per_node": 2,
        "gpus_per_node": 0,
        "backend": "local",
        "python": python,
        "env": {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        "resume": {"preset": "hf-trainer"},
        "requeue": {"lead_s": 10, "max_preemptions": 3},
        "run_dir": str(work / "runs"),
    }


def ddpctl(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ddpctl", *args], env=env, capture_output=True, text=True, check=False)
    return done.stdout + done.stderr


def submit(env: dict[str, str], spec: Path, *sets: str) -> tuple[str, Path]:
    out = ddpctl(env, "submit", str(spec), *sets)
    job = re.search(r"job (local-\d+)", out)
    run_dir = re.search(r"run dir:\s+(\S+)", out)
    if job is None or run_dir is None:
        raise SystemExit(f"submit failed:\n{out}")
    return job[1], Path(run_dir[1])


def wait_terminal(env: dict[str, str], job: str, timeout: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status: dict[str, object] = json.loads(ddpctl(env, "status", job, "--json"))
        if status.get("state") in TERMINAL:
            return status
        time.sleep(2)
    raise SystemExit(f"{job} did not end within {timeout:.0f} s")


def weights(run_dir: Path) -> str | None:
    path = run_dir / "checkpoints" / "model.safetensors"
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-clm", type=Path, required=True, help="transformers' examples/.../run_clm.py")
    parser.add_argument("--python", default=sys.executable, help="interpreter with transformers, datasets, evaluate")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--preempt-at", type=int, default=200, help="preempt once checkpoint-N exists")
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ddpctl-trainers-"))
    rng = random.Random(0)  # noqa: S311 - training text, not a secret
    lines = (" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))) for _ in range(3000))
    (work / "train.txt").write_text("\n".join(lines) + "\n")
    made = subprocess.run([opts.python, "-c", TOKENIZER, str(work / "train.txt"), str(work / "tok")], check=True,
                          capture_output=True, text=True)  # fmt: skip
    spec = work / "clm.yaml"
    spec.write_text(yaml.safe_dump(spec_for(work, opts.run_clm.resolve(), opts.python, int(made.stdout), opts.steps)))
    env = {**os.environ, "HOME": str(work / "home")}
    ref, ref_dir = submit(env, spec, "--set", "name=clm-reference")
    ref_status = wait_terminal(env, ref, 1800)
    job, run_dir = submit(env, spec)
    mark = run_dir / "checkpoints" / f"checkpoint-{opts.preempt_at}" / "trainer_state.json"
    deadline = time.monotonic() + 900
    while not mark.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    ddpctl(env, "preempt", job)
    status = wait_terminal(env, job, 1800)
    shown = ddpctl(env, "status", job)
    print(f"work dir {work}; load average {os.getloadavg()[0]:.1f}")
    print(f"reference {ref}: {ref_status['state']}, restarts {ref_status['restarts']}, weights {weights(ref_dir)}")
    print(f"preempted {job}: {status['state']}, restarts {status['restarts']}, weights {weights(run_dir)}")
    for line in shown.splitlines():
        if "attempt" in line or "last step" in line or "newest checkpoint" in line:
            print(f"  {line.strip()}")
    same = weights(run_dir) is not None and weights(run_dir) == weights(ref_dir)
    print(f"same final weights as the uninterrupted run: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
