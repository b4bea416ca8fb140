"""Per-step cost of the agreed stop check (StopAgreement) in a small DDP training loop.

Two Gloo processes on CPU train the same MLP; blocks of steps with and without `should_stop()` alternate in
one run (so drift and noise hit both equally). Prints the median step time of each and their ratio
(target: <= 1.01x).

    python benchmarks/bench_stop_check.py [--steps 10] [--rounds 100] [--min-interval 0.1]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpctl import runtime
from ddpctl.node.worker import exit_now

WORLD = 2


def step_fn(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()  # type: ignore[no-untyped-call]
    opt.step()


def report(
    times: dict[bool, list[float]],
    by_slot: dict[int, list[float]],
    inside: float,
    stop: runtime.StopAgreement,
    steps: int,
) -> None:
    base, check = statistics.median(times[False]), statistics.median(times[True])
    print(f"steps per mode: {len(times[False])} (alternating blocks of {steps}), {WORLD} gloo ranks")
    print(f"median step without stop check: {base * 1e3:.3f} ms")
    print(f"median step with stop check:    {check * 1e3:.3f} ms")
    print(f"ratio of medians: {check / base:.4f}x")
    mean_base, mean_check = statistics.fmean(times[False]), statistics.fmean(times[True])
    # The mean includes the amortised cost of the steps that did launch a reduction.
    print(f"mean step without / with: {mean_base * 1e3:.3f} / {mean_check * 1e3:.3f} ms")
    print(f"ratio of means: {mean_check / mean_base:.4f}x")
    per_step = inside / len(times[True])
    print(f"time inside should_stop(): {per_step * 1e6:.1f} us/step = {per_step / base:.2%} of a step")
    noise = statistics.median(by_slot[3]) / statistics.median(by_slot[0])
    print(f"noise floor (A/A: off blocks after vs before the on blocks): {noise:.4f}x")
    print(f"reductions launched: {stop.checks}, final spacing: every {stop.every} steps")


def worker(rank: int, port: int, args: argparse.Namespace) -> None:
    steps, rounds, width = args.steps, args.rounds, args.width
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD))
    torch.set_num_threads(1)
    ctx = runtime.init(env=dict(os.environ))
    torch.manual_seed(0)
    layers = [nn.Linear(width, width) if i % 2 == 0 else nn.ReLU() for i in range(8)]
    model = DDP(nn.Sequential(*layers))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, width), torch.randn(64, width)
    stop = runtime.StopAgreement(ctx, min_interval_s=args.min_interval)
    times: dict[bool, list[float]] = {False: [], True: []}
    by_slot: dict[int, list[float]] = {0: [], 3: []}  # the two "off" slots of ABBA: an A/A noise floor
    inside = 0.0  # time spent in should_stop() itself: the direct cost, free of scheduling noise
    for _ in range(50):
        step_fn(model, opt, x, y)  # warm-up (DDP bucket rebuild, allocator, CPU frequency)
    for rnd in range(2 * rounds):
        checked = rnd % 4 in (1, 2)  # ABBA order: neither mode always runs right after the other
        for _ in range(steps):
            start = time.perf_counter()
            step_fn(model, opt, x, y)
            if checked:
                before = time.perf_counter()
                if stop.should_stop():
                    raise RuntimeError("nobody asked to stop")
                inside += time.perf_counter() - before
            times[checked].append(time.perf_counter() - start)
            by_slot.get(rnd % 4, []).append(times[checked][-1])
    stop.close()
    if ctx.is_main:
        report(times, by_slot, inside, stop, steps)
    ctx.close()
    exit_now(0)  # past Gloo's occasional abort during interpreter teardown (see ddpctl.node.worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per block")
    parser.add_argument("--rounds", type=int, default=100, help="blocks per mode")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--min-interval", type=float, default=0.1, help="StopAgreement spacing (0: every step)")
    args = parser.parse_args()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.spawn(worker, args=(port, args), nprocs=WORLD, join=True)  # type: ignore[attr-defined,no-untyped-call]


if __name__ == "__main__":
    main()
