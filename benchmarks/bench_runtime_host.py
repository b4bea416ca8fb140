"""Host microseconds the runtime adds to each training step, at 10 and at 500 parameters (target: <= 10 us, flat).

On a fast GPU loop the host is the bottleneck: every microsecond of Python per step shows in the step time (on an
H200, a Python hook per parameter cost 4 % of a 3 ms step). A CPU cannot time a GPU step, but it can time what
matters there, the host work: the training step here is made as cheap as a step can be on the host (a DDP model
of P one-element parameters, forward = one `cat` + `sum`, backward, no optimizer), so that what the runtime adds
stands out. The model is wrapped as DDP wraps one (`.module`, forward pre-hooks) but reduces nothing: DDP's own
per-step work is the same with and without ddpctl, and it would bury 10 us in noise. Times are this thread's CPU
time (what the host spends; a loaded machine's preemptions do not count). Variants, each on its own identical
model, in alternating blocks so that drift hits all alike:

  plain        the step alone (the baseline); plain2 is the same again, the A/A noise floor
  beat         + Heartbeat.step(...) after the step (Heartbeat without model=)
  beat+model   + Heartbeat(model=ddp)'s wait-timing hooks and Heartbeat.step(...)
  stop         + StopAgreement.should_stop() (a Gloo group of one: its all-reduce is real, spaced as in training)
  all          beat+model and stop together
  per-param    a Python hook per parameter, as 0.3's Heartbeat(model=) had (for comparison: it grows with P)

Prints, per P, each variant's median block time per step and the microseconds it adds over plain, by the medians
and by the fastest blocks (on a loaded machine the fastest block is the better estimate of a fixed cost).

    python benchmarks/bench_runtime_host.py [--params 10 500] [--rounds 150] [--steps 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
from torch import nn

from ddpctl import runtime
from ddpctl.run import envvars

VARIANTS = ("plain", "beat", "beat+model", "stop", "all", "per-param", "plain2")


class Flat(nn.Module):
    """P one-element parameters; forward touches all of them with one op."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.ps = nn.ParameterList(nn.Parameter(torch.ones(1)) for _ in range(count))
        self.flat = list(self.ps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.cat(self.flat) * x).sum()


class Wrapped(nn.Module):
    """DDP's shape for the heartbeat's hooks (`.module`, forward pre-hooks on both), without its reduction."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.module(x)
        return out


def variant_step(name: str, count: int, ctx: runtime.DistContext) -> Callable[[torch.Tensor], None]:
    model = Wrapped(Flat(count))
    beat = runtime.Heartbeat(model=model if name in ("beat+model", "all") else None, every_s=1.0)
    stop = runtime.StopAgreement(ctx) if name in ("stop", "all") else None
    if name == "per-param":
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(lambda _p: None)  # type: ignore[no-untyped-call]
    done = [0]

    def step(x: torch.Tensor) -> None:
        model(x).backward()
        done[0] += 1
        if name not in ("plain", "plain2", "per-param", "stop"):
            beat.step(done[0], epoch=0, samples=1, loss=0.5)
        if stop is not None:
            stop.should_stop()

    return step


def measure(count: int, rounds: int, steps: int, ctx: runtime.DistContext) -> dict[str, list[float]]:
    fns = {name: variant_step(name, count, ctx) for name in VARIANTS}
    x = torch.ones(count)
    blocks: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for index in range(rounds + 1):
        order = VARIANTS if index % 2 == 0 else tuple(reversed(VARIANTS))
        for name in order:
            fn = fns[name]
            start = time.thread_time_ns()
            for _ in range(steps):
                fn(x)
            if index:  # the first round warms every model up
                blocks[name].append((time.thread_time_ns() - start) / 1e9 / steps)
    return blocks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", type=int, nargs="+", default=[10, 500])
    p.add_argument("--rounds", type=int, default=150, help="blocks per variant")
    p.add_argument("--steps", type=int, default=20, help="steps per block")
    args = p.parse_args()
    torch.set_num_threads(1)
    os.environ.update({envvars.RUN_DIR: tempfile.mkdtemp(prefix="bench-host-"), envvars.ATTEMPT: "0"})
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0", "RANK": "0", "WORLD_SIZE": "1"})
    ctx = runtime.init("gloo")  # distributed: the stop check's all-reduce is real
    print(f"{args.rounds} alternating blocks of {args.steps} steps per variant; host us added per step vs plain")
    print(f"{'params':>6} {'variant':<11} {'step (us)':>10} {'added, median':>14} {'added, fastest':>15}")
    for count in args.params:
        blocks = measure(count, args.rounds, args.steps, ctx)
        med = {name: statistics.median(times) * 1e6 for name, times in blocks.items()}
        low = {name: min(times) * 1e6 for name, times in blocks.items()}
        for name in VARIANTS[1:]:
            added_med, added_low = med[name] - med["plain"], low[name] - low["plain"]
            print(f"{count:>6} {name:<11} {med[name]:>10.1f} {added_med:>+14.1f} {added_low:>+15.1f}")
        print(f"{count:>6} {'plain':<11} {med['plain']:>10.1f} {'(baseline)':>14}")
    print("target: beat, beat+model, stop and all add <= 10 us per step, the same at every P (plain2: noise floor)")
    ctx.close()


if __name__ == "__main__":
    main()
