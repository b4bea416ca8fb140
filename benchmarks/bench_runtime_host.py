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

On a loaded machine a step's own noise hides 10 us; so the script also times each part on its own ("parts"), the
best of several repeats of many calls: `beat.step(...)` alone, `should_stop()` alone (its all-reduce launches
amortised at the spacing training gets), and the wait-timing hooks as the backward pass of a one-parameter model
with and without them, times the number of Python hooks a step runs, counted on the models of both sizes.

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


def best_us(fn: Callable[[], object], calls: int = 2000, repeats: int = 7) -> float:
    """The best of `repeats` runs of `calls` calls, in this thread's CPU microseconds per call."""
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time_ns() - start) / 1e3 / calls)
    return best


def hooks_per_step(count: int) -> int:
    """How many Python hooks Heartbeat(model=)'s timer puts on a P-parameter model (each runs once a step)."""
    model = Wrapped(Flat(count))
    runtime.Heartbeat(model=model, every_s=3600.0)
    forward = len(model._forward_pre_hooks) + len(model.module._forward_pre_hooks)
    grads = sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in model.parameters())
    return forward + grads


def parts(ctx: runtime.DistContext) -> None:
    beat = runtime.Heartbeat(every_s=3600.0)  # no write inside the timing: a write is once a second, timed apart
    counter = [0]

    def step() -> None:
        counter[0] += 1
        beat.step(counter[0], epoch=0, samples=32, loss=0.5)

    stop = runtime.StopAgreement(ctx)
    one = Wrapped(Flat(1))
    hooked = Wrapped(Flat(1))
    runtime.Heartbeat(model=hooked, every_s=3600.0)
    x = torch.ones(1)
    bare = best_us(lambda: one(x).backward(), calls=500)
    with_hook = best_us(lambda: hooked(x).backward(), calls=500)
    per_hook = max(0.0, with_hook - bare) / max(1, hooks_per_step(1))
    beat_us, stop_us = best_us(step), best_us(stop.should_stop, calls=20000)
    stop.close()
    # Every check point launches (and later waits for) one all-reduce: its cost, spread over the steps of
    # min_interval_s (0.1 s) at a fast GPU loop's 3.1 ms steps (H200, issue 41).
    every = runtime.StopAgreement(ctx, min_interval_s=0.0)
    launch_us = best_us(every.should_stop, calls=500)
    every.close()
    at_3ms = launch_us * 3.1e-3 / 0.1 + stop_us
    print("\nparts, best of 7 repeats, this thread's CPU us per call:")
    print(f"  beat.step(...)            {beat_us:6.2f} us")
    print(f"  StopAgreement.should_stop {stop_us:6.2f} us (spacing every {stop.every} steps)")
    print(f"  ... one check point        {launch_us:6.2f} us (launch + wait of its all-reduce)")
    print(f"  ... at 3.1 ms steps        {at_3ms:6.2f} us per step (a check point every 0.1 s = 32 steps)")
    print(f"  one wait-timing hook      {per_hook:6.2f} us")
    for count in (10, 500):
        hooks = hooks_per_step(count)
        total = beat_us + at_3ms + hooks * per_hook
        print(
            f"  P={count:<4} hooks per step: {hooks}; beat.step + hooks + should_stop at 3.1 ms steps = {total:.2f} us"
        )


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
    parts(ctx)
    ctx.close()


if __name__ == "__main__":
    main()
