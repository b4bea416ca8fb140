"""Per-step cost of the progress heartbeat (runtime.Heartbeat) in a small DDP training loop.

One process, a Gloo group of one (runtime.init without torchrun), three identical DDP models: a plain one, one
with `Heartbeat(model=...)` (its hooks time the waits inside DDP) and `beat.step(...)` after every optimizer
step, writing its record to a temporary run dir at most once a second, and a second plain one for the A/A noise
floor. Blocks of steps of the three alternate, so drift and noise hit all equally. Prints the medians side by
side and the ratio (target: <= 1.01x). `--no-hook` measures the heartbeat without `model=`.

    python benchmarks/bench_progress.py [--steps 20] [--rounds 60] [--width 256]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpctl import runtime
from ddpctl.run import envvars

MODES = ("plain", "beat", "plain2")


def build(width: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
    model = DDP(net)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def step_fn(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    opt.step()
    return float(loss.detach())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="steps per block")
    p.add_argument("--rounds", type=int, default=60, help="blocks per mode")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--no-hook", action="store_true", help="heartbeat without model= (no wait timing hooks)")
    args = p.parse_args()
    torch.set_num_threads(1)
    run_dir = tempfile.mkdtemp(prefix="bench-progress-")
    os.environ.update({envvars.RUN_DIR: run_dir, envvars.ATTEMPT: "0"})
    ctx = runtime.init()
    models = {mode: build(args.width) for mode in MODES}  # same seed: identical weights
    beat = runtime.Heartbeat(total_steps=args.steps * args.rounds, model=None if args.no_hook else models["beat"][0])
    x, y = torch.randn(64, args.width), torch.randn(64, 1)
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    inside, done = 0.0, 0
    for index in range(len(MODES) * (args.rounds + 1)):
        mode = MODES[index % len(MODES)]
        model, opt = models[mode]
        for _ in range(args.steps):
            start = time.perf_counter()
            loss = step_fn(model, opt, x, y)
            if mode == "beat":
                done += 1
                t0 = time.perf_counter()
                beat.step(done, epoch=0, samples=64, loss=loss)
                inside += time.perf_counter() - t0
            if index >= len(MODES):  # the first block of each warms its model up
                times[mode].append(time.perf_counter() - start)
    beat.close()
    base, ours, other = (statistics.median(times[m]) for m in MODES)
    hook = "without" if args.no_hook else "with"
    print(f"steps per mode: {len(times['plain'])} (alternating blocks of {args.steps}), width {args.width}")
    print(f"median step, plain DDP model:                       {base * 1e3:.3f} ms")
    print(f"median step, heartbeat ({hook} wait timing hooks): {ours * 1e3:.3f} ms")
    print(f"ratio heartbeat/plain = {ours / base:.4f}x (target <= 1.01x)")
    print(f"noise floor (A/A: a second plain model / plain) = {other / base:.4f}x")
    mean_base, mean_ours = statistics.fmean(times["plain"]), statistics.fmean(times["beat"])
    print(f"ratio of means (includes the once-a-second record writes) = {mean_ours / mean_base:.4f}x")
    per = inside / max(1, done)
    print(f"time inside beat.step(): {per * 1e6:.1f} us/step = {per / base:.2%} of a step")
    ctx.close()


if __name__ == "__main__":
    main()
