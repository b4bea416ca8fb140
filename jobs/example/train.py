"""Example DDP trainer for ddpctl: MiniResNet on synthetic data, preemption-safe with exact mid-epoch resume.

Run it under `ddpctl launch` (see jobs/example.yaml) or directly with torchrun:
    torchrun --nproc-per-node 2 -m ddpctl.node.worker jobs/example/train.py --epochs 2
At the end rank 0 prints `final-weights-sha256=<hex>`: the same on every run, interrupted and resumed or not.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.distributed as dist
from data import SyntheticImages
from model import MiniResNet
from quiet import without_stderr_lines
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from track import Trackers

from ddpctl import runtime


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=32, help="per rank, per micro-step")
    p.add_argument("--accum", type=int, default=2, help="micro-steps per optimizer step")
    # LR and SEED from the environment: a sweep's `--grid env.LR=0.1,0.01` reaches the script without args.
    p.add_argument("--lr", type=float, default=float(os.environ.get("LR", "0.05")), help="default: $LR or 0.05")
    p.add_argument("--seed", type=int, default=int(os.environ.get("SEED", "0")), help="default: $SEED or 0")
    p.add_argument("--steps-per-epoch", type=int, default=0, help="cap optimizer steps per epoch (0: all)")
    p.add_argument("--ckpt-every", type=int, default=0, help="checkpoint every N optimizer steps (0: never)")
    p.add_argument("--async-ckpt", action="store_true", help="write periodic checkpoints in the background")
    p.add_argument("--sleep-per-step", type=float, default=0.0, help="seconds; gives tests time to signal")
    p.add_argument("--late-from-step", type=int, default=0, help="from this step on sleep --late-sleep instead")
    p.add_argument("--late-sleep", type=float, default=0.0, help="... (a preemption late in the run lands mid-run)")
    p.add_argument("--crash-at-step", type=int, default=0, help="raise after this optimizer step (tests)")
    p.add_argument("--crash-rank", type=int, default=0)
    p.add_argument("--crash-in-save", action="store_true", help="crash inside the checkpoint save instead")
    p.add_argument("--hang-at-step", type=int, default=0, help="first attempt only: --hang-rank sleeps forever")
    p.add_argument("--hang-rank", type=int, default=0)
    p.add_argument("--skip-allreduce-at-step", type=int, default=0, help="first attempt only: the ranks all-reduce")
    p.add_argument("--skip-rank", type=int, default=0, help="... a metric, but this rank skips it (a desync)")
    p.add_argument("--eval-at-step", type=int, default=0, help="first attempt only: rank 0 evaluates --eval-s")
    p.add_argument("--eval-s", type=float, default=0.0, help="... while the other ranks wait at a barrier")
    p.add_argument("--eval-undeclared", action="store_true", help="... without declaring it (beat.pause)")
    p.add_argument("--eval-holds-gil", action="store_true", help="... in C code that holds the GIL throughout")
    p.add_argument("--slow-rank", type=int, default=-1, help="this rank sleeps --slow-s after every step")
    p.add_argument("--slow-s", type=float, default=0.0)
    p.add_argument("--backend", default=None, help="process group backend (default: NCCL on GPUs, else Gloo)")
    return p.parse_args(argv)


@dataclass
class Trainer:
    args: argparse.Namespace
    ctx: runtime.DistContext
    model: nn.Module
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    sampler: runtime.ResumableSampler
    loader: DataLoader[Any]
    steps_per_epoch: int
    progress: runtime.Progress = field(default_factory=lambda: runtime.Progress(0, 0, 0))
    beat: runtime.Heartbeat | None = None
    track: Trackers | None = None
    running: float = 0.0
    side: dist.ProcessGroup | None = None  # --skip-allreduce-at-step: where the skipping rank waits instead

    @property
    def total_steps(self) -> int:
        return self.args.epochs * self.steps_per_epoch

    def micro_step(self, images: torch.Tensor, labels: torch.Tensor, sync: bool) -> float:
        # Augmentation draws from this rank's global torch RNG: its state is what resume must restore.
        flip = torch.rand(images.shape[0]) < 0.5
        images = torch.where(flip[:, None, None, None], images.flip(3), images).to(self.ctx.device)
        labels = labels.to(self.ctx.device)
        cuda = self.ctx.device.type == "cuda"
        # Gradients are all-reduced only on the last micro-step of an accumulation window.
        with nullcontext() if sync else self.model.no_sync():  # type: ignore[operator]
            with torch.autocast("cuda", dtype=torch.float16, enabled=cuda):
                loss = nn.functional.cross_entropy(self.model(images), labels) / self.args.accum
            self.scaler.scale(loss).backward()
        return float(loss.item()) * self.args.accum

    def optimizer_step(self, batches: Any) -> float:
        losses = []
        for micro in range(self.args.accum):
            images, labels = next(batches)
            losses.append(self.micro_step(images, labels, sync=micro == self.args.accum - 1))
        self.scaler.step(self.opt)
        self.scaler.update()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()
        p = self.progress
        self.progress = replace(p, step=p.step + 1, batch_in_epoch=p.batch_in_epoch + self.args.accum)
        return sum(losses) / len(losses)


# find_unused_parameters=True is deliberate (see build): torch's 400-character advice against it, printed by every
# rank in its first step, is noise here. Only that one warning is dropped.
UNUSED_PARAMETERS_WARNING = "find_unused_parameters=True was specified in DDP constructor"


def grad_group(ctx: runtime.DistContext) -> dist.ProcessGroup | None:
    """The group DDP reduces gradients on: the default one, unless it has no CPU backend while the model is on the
    CPU. That is the NCCL-shaped test lane (DDPCTL_PG_BACKEND=cuda:gloo): the default group refuses CPU tensors as
    NCCL does, so it proves that ddpctl's own collectives never use it; the model's gradients get a Gloo group."""
    if ctx.distributed and ctx.device.type == "cpu" and "cpu:" not in dist.get_backend_config():
        group = dist.new_group(backend="gloo")
        return group if isinstance(group, dist.ProcessGroup) else None
    return None


def build(args: argparse.Namespace, ctx: runtime.DistContext) -> Trainer:
    torch.manual_seed(args.seed)  # identical initial weights on every rank (DDP also broadcasts rank 0's)
    net = MiniResNet().to(ctx.device)
    # find_unused_parameters=True also stops DDP from re-bucketing gradients after the first synced step of
    # each attempt. That re-bucketing moves parameters inside the flat buffer, which changes the summation
    # order of Gloo's ring all-reduce with more than 2 ranks: a resumed run would differ in the last bits.
    devices = [ctx.local_rank] if ctx.device.type == "cuda" else None
    model: nn.Module = DDP(net, device_ids=devices, find_unused_parameters=True, process_group=grad_group(ctx))
    dataset = SyntheticImages(args.samples, seed=args.seed)
    sampler = runtime.ResumableSampler(
        dataset, args.batch_size, num_replicas=ctx.world_size, rank=ctx.rank, seed=args.seed, drop_last=True
    )
    # A private generator: DataLoader draws a seed per iterator, which must not consume the global stream.
    gen = torch.Generator().manual_seed(args.seed)
    loader = DataLoader(dataset, args.batch_size, sampler=sampler, drop_last=True, num_workers=0, generator=gen)
    steps = len(sampler) // args.batch_size // args.accum
    steps = min(steps, args.steps_per_epoch) if args.steps_per_epoch else steps
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.epochs * steps))
    scaler = torch.amp.GradScaler("cuda", enabled=ctx.device.type == "cuda")
    torch.manual_seed(args.seed + 1000 + ctx.rank)  # per-rank augmentation stream
    return Trainer(args, ctx, model, opt, sched, scaler, sampler, loader, steps)


def weights_sha256(model: nn.Module) -> str:
    module = getattr(model, "module", model)
    digest = hashlib.sha256()
    for key, tensor in sorted(module.state_dict().items()):
        digest.update(key.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def log(t: Trainer, message: str) -> None:
    if t.ctx.is_main:
        print(f"[example] {message}", flush=True)


def save(t: Trainer, ckpt: runtime.Checkpointer, blocking: bool) -> Any:
    state = runtime.capture(
        t.model, t.opt, t.progress, scheduler=t.sched, scaler=t.scaler, extra={"running_loss": t.running}
    )  # so the display carries on after a resume
    if t.args.crash_in_save and t.progress.step == t.args.crash_at_step and t.ctx.rank == t.args.crash_rank:
        state[runtime.RANK_KEY]["unpicklable"] = lambda: None  # torch.save fails half-way on this rank only
    return ckpt.save(t.progress.step, state, blocking=blocking)


def inject_delays(t: Trainer, step: int) -> None:
    """Test hooks for the health checks: a hidden stall (first attempt only) and a straggler."""
    args, rank = t.args, t.ctx.rank
    if step == args.hang_at_step and rank == args.hang_rank and t.ctx.attempt == 0:
        print(f"[example] rank {rank} stalls at step {step}", flush=True)
        time.sleep(10**9)  # the hidden stall: the watchdog must find this line in the stack dump
    if rank == args.slow_rank and args.slow_s:
        time.sleep(args.slow_s)
    if step == args.eval_at_step and t.ctx.attempt == 0:
        evaluate(t)
    if step == args.skip_allreduce_at_step and t.ctx.attempt == 0:
        skip_allreduce(t)


def skip_allreduce(t: Trainer) -> None:
    """A desync: the ranks all-reduce a metric, but --skip-rank takes a branch without it and waits at a barrier
    of another group, which the others never reach. Each waits in a collective the others never enter; the flight
    recorder tells which one each is in (the stacks show every rank inside torch)."""
    if t.ctx.rank == t.args.skip_rank:
        print(f"[example] rank {t.ctx.rank} skips the all-reduce at step {t.progress.step}", flush=True)
        dist.barrier(group=t.side)
    else:
        dist.all_reduce(torch.zeros(3, device=t.ctx.device))


def evaluate(t: Trainer) -> None:
    """A rank-0 evaluation (a sleep standing in for it) while the other ranks wait at a barrier: a normal
    pause, declared to the hang watchdog with `beat.pause` (unless --eval-undeclared)."""
    if t.ctx.rank == 0:
        print(f"[example] rank 0 evaluates for {t.args.eval_s:g} s", flush=True)
        wait = hold_gil if t.args.eval_holds_gil else time.sleep
        if t.beat is not None and not t.args.eval_undeclared:
            with t.beat.pause("eval", allowance_s=600 if t.args.eval_holds_gil else None):
                wait(t.args.eval_s)
        else:
            wait(t.args.eval_s)
    t.ctx.barrier()


def hold_gil(seconds: float) -> None:
    """C-level work that never releases the GIL (libc's sleep called through PyDLL, which keeps it), as a C
    extension's long call does: every thread of the rank, its heartbeat's included, stands still meanwhile."""
    import ctypes

    ctypes.PyDLL(None).sleep(int(seconds))


def after_step(t: Trainer, ckpt: runtime.Checkpointer, stop: runtime.StopAgreement, loss: float) -> None:
    """Logging, crash injection, periodic checkpoint and the agreed stop, in that order."""
    step, args = t.progress.step, t.args
    t.running = loss if step == 1 else 0.9 * t.running + 0.1 * loss
    if t.beat is not None:
        t.beat.step(step, epoch=t.progress.epoch, samples=args.batch_size * args.accum, loss=loss)
    log(t, f"step {step}/{t.total_steps} epoch {t.progress.epoch} loss {loss:.4f} running {t.running:.4f}")
    if t.track is not None:
        t.track.log(step, loss=loss)
    inject_delays(t, step)
    if step == args.crash_at_step and t.ctx.rank == args.crash_rank and not args.crash_in_save:
        raise RuntimeError(f"injected crash at step {step} on rank {t.ctx.rank}")
    saved = None
    if args.ckpt_every and step % args.ckpt_every == 0 and step < t.total_steps:
        saved = save(t, ckpt, blocking=not args.async_ckpt)
    pause = args.late_sleep if args.late_from_step and step >= args.late_from_step else args.sleep_per_step
    if pause:
        time.sleep(pause)
    if step < t.total_steps and stop.should_stop():
        print(f"[example] rank {t.ctx.rank} stop agreed at step {step}", flush=True)
        ckpt.wait()
        path = saved if saved is not None else save(t, ckpt, blocking=True)
        stop.close()
        if t.track is not None:
            t.track.close()
        runtime.finish_for_requeue(t.ctx, step, path)


def train(t: Trainer, ckpt: runtime.Checkpointer, stop: runtime.StopAgreement) -> None:
    first = True  # the step in which DDP prints its find_unused_parameters advice
    while t.progress.step < t.total_steps:
        epoch = t.progress.epoch
        t.sampler.set_epoch(epoch, skip_batches=t.progress.batch_in_epoch)
        batches = iter(t.loader)
        while t.progress.batch_in_epoch < t.steps_per_epoch * t.args.accum:
            if first:
                with without_stderr_lines(UNUSED_PARAMETERS_WARNING):
                    loss = t.optimizer_step(batches)
                first = False
            else:
                loss = t.optimizer_step(batches)
            after_step(t, ckpt, stop, loss)
            if t.progress.step >= t.total_steps:
                return
        t.progress = runtime.Progress(t.progress.step, epoch + 1, 0)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    ctx = runtime.init(args.backend)
    torch.use_deterministic_algorithms(True, warn_only=ctx.device.type == "cuda")
    t = build(args, ctx)
    if args.skip_allreduce_at_step and ctx.distributed:
        t.side = dist.new_group(backend="gloo")  # type: ignore[assignment]  # every rank creates every group
    ckpt, stop = runtime.Checkpointer(ctx=ctx), runtime.StopAgreement(ctx)
    found = ckpt.load_latest()
    if found is not None:
        step, state = found
        t.progress = runtime.restore(state, t.model, t.opt, t.sampler, scheduler=t.sched, scaler=t.scaler)
        t.running = float(state.get("extra", {}).get("running_loss", 0.0))
        log(t, f"resumed from step {step} (epoch {t.progress.epoch}, batch {t.progress.batch_in_epoch})")
    t.beat = runtime.Heartbeat(total_steps=t.total_steps, model=t.model)
    t.track = Trackers(ctx.is_main, t.progress.step)  # what the job's `tracking:` turned on (rank 0)
    start = time.monotonic()
    train(t, ckpt, stop)
    t.track.close()
    t.beat.close()
    stop.close()
    ckpt.wait()
    log(t, f"done: {t.progress.step} steps in {time.monotonic() - start:.1f}s")
    if ctx.is_main:
        print(f"final-weights-sha256={weights_sha256(t.model)}", flush=True)
    ctx.close()


if __name__ == "__main__":
    main()
