"""How long a checkpoint save blocks the training loop, for a ~1 GiB state.

Baselines: a plain `torch.save` of the same state (no fsync, no atomic rename: the least a loop can pay, and not
durable), and the same durability by hand: `torch.save` to a file, then `fsync` (target: blocking
`Checkpointer.save` <= 1.10x this). Measured, in an order that rotates every round so drift in load hits all
alike: both baselines, `Checkpointer.save(blocking=True)` (atomic + fsync + hashes), and
`Checkpointer.save(blocking=False)`, whose stall is the in-memory snapshot (into buffers reused from the previous
save); its background write is timed separately (`wait()`). Prints each median, the ratios and the load average.

    python benchmarks/bench_checkpoint_stall.py [--gib 1.0] [--rounds 4] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ddpctl.runtime import RANK_KEY, Checkpointer
from ddpctl.runtime.dist import DistContext

SOLO = DistContext(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"), attempt=0, distributed=False)


def make_state(gib: float) -> dict[str, Any]:
    """Model-like state: 64 MiB float32 tensors (like large layers), plus a tiny per-rank part."""
    per = 16 * 1024 * 1024
    count = max(1, round(gib * (1 << 30) / (4 * per)))
    model = {f"layer{i}.weight": torch.randn(per) for i in range(count)}
    return {"model": model, "step": 0, RANK_KEY: {"rng": torch.get_rng_state()}}


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def save_fsync(state: dict[str, Any], path: Path) -> None:
    with path.open("wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())


def one_round(state: dict[str, Any], root: Path, ckpt: Checkpointer, step: int, out: dict[str, list[float]]) -> None:
    plain = root / "plain.pt"

    def save_plain() -> None:
        out["torch.save"].append(timed(lambda: torch.save(state, plain)))
        plain.unlink()  # outside the timing, like the Checkpointer's retention below

    def save_durable() -> None:
        out["torch.save+fsync"].append(timed(lambda: save_fsync(state, plain)))
        plain.unlink()

    def ours() -> None:
        out["sync"].append(timed(lambda: ckpt.save(2 * step, state)))
        ckpt.wait()  # retention of the older step runs in the background; not part of the stall

    def background() -> None:
        out["async stall"].append(timed(lambda: ckpt.save(2 * step + 1, state, blocking=False)))
        out["async write"].append(timed(ckpt.wait) + out["async stall"][-1])

    order = [save_plain, save_durable, ours, background]
    shift = step % len(order)
    for run in order[shift:] + order[:shift]:
        run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    state = make_state(args.gib)
    size = sum(t.numel() * t.element_size() for t in state["model"].values()) / (1 << 30)
    root = Path(tempfile.mkdtemp(prefix="ddpctl-bench-", dir=args.dir))
    out: dict[str, list[float]] = {
        "torch.save": [],
        "torch.save+fsync": [],
        "sync": [],
        "async stall": [],
        "async write": [],
    }
    # One Checkpointer for all rounds, as in training: its snapshot buffers are allocated by the first
    # background save (reported separately as the cold stall) and reused afterwards.
    ckpt = Checkpointer(root / "ckpt", keep=1, ctx=SOLO, env={})
    try:
        for step in range(args.rounds):
            one_round(state, root, ckpt, step + 1, out)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    cold = out["async stall"].pop(0)
    base = statistics.median(out["torch.save"])
    durable = statistics.median(out["torch.save+fsync"])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    tensors = len(state["model"])
    print(f"state: {size:.2f} GiB in {tensors} tensors; {args.rounds} rounds, load average {load}; medians:")
    for name, label in [
        ("torch.save", "plain torch.save (baseline, not durable)"),
        ("torch.save+fsync", "torch.save to a file + fsync (baseline)"),
        ("sync", "Checkpointer.save, blocking"),
        ("async stall", "Checkpointer.save, background: stall"),
        ("async write", "Checkpointer.save, background: until complete"),
    ]:
        median = statistics.median(out[name])
        print(f"  {label:<48} {median:7.3f} s  ratio {median / base:6.3f}x")
    stall, sync = statistics.median(out["async stall"]), statistics.median(out["sync"])
    print(f"  blocking Checkpointer.save / (torch.save + fsync): {sync / durable:.3f}x (target <= 1.10)")
    print(f"  background stall / blocking Checkpointer.save: {stall / sync:.3f}x (target <= 0.05)")
    print(f"  (first background save, allocating its buffers: stall {cold:.3f} s, ratio {cold / base:.3f}x)")


if __name__ == "__main__":
    main()
