"""A real Lightning run (a tiny model and data made here: nothing downloaded), 2 nodes x 2 ranks on the local backend,
preempted mid-run (issue 42): `ddpctl.integrations.lightning.StopCallback` saves `stop-step=<step>.ckpt` at the
agreed step and exits 0 on every rank, `resume: {preset: lightning}` hands the next attempt `--ckpt_path` of that
file, and the run ends with the weights of an uninterrupted one.

Lightning restarts a plain DataLoader's epoch on a mid-epoch resume, so each step's batch is made from the step
and the rank (not from the loader): the final weights then depend only on the model and optimizer state carried
through the checkpoint (SGD with momentum, float64), and are compared with a replay of the same 4-rank DDP steps
in this process. They agree to within 1e-6, not bit for bit (measured: 1.7e-8 after 80 steps with the stop at 72;
the source of that difference is not pinned down), while one step lost or repeated at the stop, or the momentum
lost, moves them by more than 1e-3 (`test_the_replay_tells_a_lost_step_or_lost_momentum_apart`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clitools import preempt_trainer

pytest.importorskip("lightning")
pytestmark = pytest.mark.torchrun

LIGHTNING_SCRIPT = """
import json, os, sys, time
import torch
import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from ddpctl.integrations.lightning import StopCallback

def arg(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None

def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(4, 8, generator=g, dtype=torch.float64)
    return x, x.sum(1, keepdim=True)

class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(8, 1)
    def training_step(self, _batch, _idx):
        x, y = batch(self.global_step, self.global_rank)
        # The first attempt slow enough to be preempted mid-run whatever the machine's load; the second fast.
        time.sleep(0.3 if os.environ.get("DDPCTL_ATTEMPT") == "0" else 0.02)
        return torch.nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.02, momentum=0.9)

class Pace(L.Callback):
    def on_train_batch_end(self, trainer, *_):
        if trainer.is_global_zero:
            print(f"step {trainer.global_step}", flush=True)

local = int(os.environ["LOCAL_WORLD_SIZE"])
trainer = L.Trainer(
    accelerator="cpu", devices=local, num_nodes=int(os.environ["WORLD_SIZE"]) // local, strategy="ddp",
    precision="64-true", max_steps=int(arg("--max_steps")), logger=False, enable_progress_bar=False,
    enable_model_summary=False, default_root_dir=arg("--dir"),
    callbacks=[ModelCheckpoint(dirpath=arg("--dir"), every_n_train_steps=10), Pace(), StopCallback()],
)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(100000, 1)), batch_size=1)
ckpt = arg("--ckpt_path")
model = Model()
if trainer.is_global_zero:
    print(f"ckpt_path={ckpt}", flush=True)
trainer.fit(model, data, ckpt_path=ckpt)
if trainer.is_global_zero:
    print("weights " + json.dumps([v.hex() for v in torch.cat([p.flatten() for p in model.parameters()]).tolist()]))
    print(f"finished at step {trainer.global_step}", flush=True)
"""


def replay(steps: int, world: int = 4, skip: int | None = None, reset: int | None = None) -> list[float]:
    """The same DDP steps in one process: each rank's gradient of its own batch, averaged, SGD with momentum
    (`skip`: from that step on, each step's batch is the next step's; `reset`: the momentum is lost there)."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Linear(8, 1).double()
    opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9)
    for at in range(steps):
        if at == reset:
            opt = torch.optim.SGD(net.parameters(), lr=0.02, momentum=0.9)
        step = at + 1 if skip is not None and at >= skip else at
        grads = [torch.zeros_like(p) for p in net.parameters()]
        for rank in range(world):
            g = torch.Generator().manual_seed(1000 * step + rank)
            x = torch.randn(4, 8, generator=g, dtype=torch.float64)
            net.zero_grad()
            torch.nn.functional.mse_loss(net(x), x.sum(1, keepdim=True)).backward()  # type: ignore[no-untyped-call]
            grads = [a + p.grad for a, p in zip(grads, net.parameters(), strict=True)]  # type: ignore[operator]
        for p, total in zip(net.parameters(), grads, strict=True):
            p.grad = total / world
        opt.step()
    return [float(v) for v in torch.cat([p.detach().flatten() for p in net.parameters()]).tolist()]


def distance(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def test_the_replay_tells_a_lost_step_or_lost_momentum_apart() -> None:
    pytest.importorskip("torch")
    base = replay(36)
    assert min(distance(base, replay(36, skip=30)), distance(base, replay(36, reset=30))) > 1e-3


def rank0(run_dir: Path, attempt: int) -> list[str]:
    log = run_dir / f"attempt-{attempt}" / "rank-0.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(("step ", "ckpt_path=", "finished", "weights "))]


def test_a_preempted_lightning_run_saves_at_the_agreed_step_and_resumes_to_the_same_weights(tmp_path: Path) -> None:
    args = ["--dir", "$DDPCTL_CKPT_DIR", "--max_steps", "50"]
    ran = preempt_trainer(
        tmp_path, "lit", LIGHTNING_SCRIPT, args, "lightning", ready=lambda d: "step 10" in rank0(d, 0), timeout=300
    )
    cli, job_id, status, run_dir, found, info = ran.cli, ran.job_id, ran.status, ran.run_dir, ran.events, ran.info
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, (status, info)
    stop = next(e for e in found if e["event"] == "stop")
    step = stop["step"]
    ckpt = run_dir / "checkpoints" / f"stop-step={step}.ckpt"
    assert step >= 10 and stop["checkpoint"] == str(ckpt), info
    decision = next(e for e in found if e["event"] == "decision")
    assert (decision["action"], decision["kind"], decision["cause"]) == ("requeue", "preemption", "stop"), info
    first, second = rank0(run_dir, 0), rank0(run_dir, 1)
    assert first[0] == "ckpt_path=None" and f"step {step}" == first[-1], first
    assert second[0] == f"ckpt_path={ckpt}" and second[1] == f"step {step + 1}", second
    assert second[-1] == "finished at step 50", second
    resumed = next(e for e in found if e["event"] == "resume-point" and e["attempt"] == 1)
    assert resumed["step"] == step, info
    weights = [float.fromhex(v) for v in json.loads(second[-2].removeprefix("weights "))]
    assert distance(weights, replay(50)) < 1e-6, (weights, replay(50))
    shown = cli.run("status", job_id).stdout
    assert f"attempt 1: resumed from step {step} ({ckpt}), given --ckpt_path {ckpt}" in shown, shown
