"""Exact-resume state, the stop flag and the requeue exit, in one process (no process group)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from clitools import events as records
from torch import nn

from ddpctl.runtime import (
    Checkpointer,
    Progress,
    ResumableSampler,
    StopAgreement,
    capture,
    capture_rng,
    finish_for_requeue,
    init,
    restore,
    restore_rng,
    stopflag,
)


@pytest.fixture(autouse=True)
def clean_flag() -> None:
    stopflag.reset()


def draw() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()  # noqa: S311 - RNG state is the subject


def test_rng_roundtrip_is_exact_and_weights_only(tmp_path: Path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.randn()  # leaves a cached gaussian in numpy's state
    saved = capture_rng()
    torch.save(saved, tmp_path / "rng.pt")
    expected = draw()
    draw()
    restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert draw() == expected


def test_sampler_skips_exactly_the_consumed_batches() -> None:
    data = list(range(100))
    full = ResumableSampler(data, batch_size=4, num_replicas=2, rank=1, seed=5)  # type: ignore[arg-type]
    full.set_epoch(3)
    resumed = ResumableSampler(data, batch_size=4, num_replicas=2, rank=1, seed=5)  # type: ignore[arg-type]
    resumed.set_epoch(3, skip_batches=5)
    assert list(resumed) == list(full)[20:]
    assert len(resumed) == len(full) - 20
    resumed.set_epoch(4)
    assert len(resumed) == 50


def make_run(seed: int = 0) -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    return model, opt, torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)


def train(model: nn.Module, opt: torch.optim.Optimizer, sched: object, steps: int) -> None:
    for _ in range(steps):
        loss = model(torch.randn(8, 4)).square().mean()  # inputs and dropout draw from the global RNG
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()  # type: ignore[attr-defined]


def test_interrupted_training_equals_uninterrupted(tmp_path: Path) -> None:
    model, opt, sched = make_run()
    train(model, opt, sched, 6)
    expected = model.state_dict()

    model, opt, sched = make_run()
    train(model, opt, sched, 4)
    ctx = init(env={})
    ckpt = Checkpointer(tmp_path, ctx=ctx)
    ckpt.save(4, capture(model, opt, Progress(4, 0, 4), scheduler=sched))
    torch.manual_seed(999)  # a fresh process would start from other RNG states

    model, opt, sched = make_run(seed=1)
    found = ckpt.load_latest()
    assert found is not None
    assert restore(found[1], model, opt, scheduler=sched) == Progress(4, 0, 4)
    train(model, opt, sched, 2)
    for key, value in expected.items():
        assert torch.equal(model.state_dict()[key], value), key
    ctx.close()


def test_single_process_context_and_agreement() -> None:
    ctx = init(env={})
    assert (ctx.rank, ctx.world_size, ctx.is_main, ctx.distributed) == (0, 1, True, False)
    nn.parallel.DistributedDataParallel(nn.Linear(2, 2))  # a group of one: plain `python train.py` works
    with StopAgreement(ctx) as stop:
        assert not stop.should_stop()
        stopflag.request_stop("manual")
        assert stop.should_stop()
        stopflag.reset()
        assert stop.should_stop()  # sticky: the agreed decision never flips back
    ctx.close()
    ctx.close()  # idempotent


def test_finish_for_requeue_writes_marker_and_event(tmp_path: Path) -> None:
    env = {"DDPCTL_RUN_DIR": str(tmp_path), "DDPCTL_ATTEMPT": "2"}
    ctx = init(env=env)
    stopflag.request_stop("file:x")
    with pytest.raises(SystemExit) as exit_info:
        finish_for_requeue(ctx, 17, tmp_path / "ckpt" / "step-000000017", env=env)
    assert exit_info.value.code == 0
    assert not torch.distributed.is_initialized()
    marker = json.loads((tmp_path / "attempt-2" / "stopped.json").read_text())
    assert marker["step"] == 17
    assert marker["checkpoint"].endswith("step-000000017")
    assert marker["signal_time"] == stopflag.stop_time()
    assert marker["source"] == "file:x"
    (event,) = [e for e in records(tmp_path) if e["event"] == "stop"]
    assert (event["step"], event["attempt"]) == (17, 2)
