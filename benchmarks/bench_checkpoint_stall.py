"""How long a checkpoint save blocks the training loop, for a ~1 GiB state.

Baseline: a plain `torch.save` of the same state (no fsync, no atomic rename: the least a loop can pay).
Measured, alternating in one run: the baseline, `Checkpointer.save(blocking=True)` (atomic + fsync + hashes),
and `Checkpointer.save(blocking=False)`, whose stall is the in-memory snapshot (into buffers reused from the
previous save); its background write is timed separately (`wait()`). Prints each median and the ratios to the baseline.

    python benchmarks/bench_checkpoint_stall.py [--gib 1.0] [--rounds 4] [--dir DIR]
"""

from __future__ import annotations

import argparse
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


def one_round(state: dict[str, Any], root: Path, ckpt: Checkpointer, step: int, out: dict[str, list[float]]) -> None:
    plain = root / "plain.pt"
    out["torch.save"].append(timed(lambda: torch.save(state, plain)))
    plain.unlink()
    out["sync"].append(timed(lambda: ckpt.save(2 * step, state)))
    out["async stall"].append(timed(lambda: ckpt.save(2 * step + 1, state, blocking=False)))
    out["async write"].append(timed(ckpt.wait) + out["async stall"][-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    state = make_state(args.gib)
    size = sum(t.numel() * t.element_size() for t in state["model"].values()) / (1 << 30)
    root = Path(tempfile.mkdtemp(prefix="ddpctl-bench-", dir=args.dir))
    out: dict[str, list[float]] = {"torch.save": [], "sync": [], "async stall": [], "async write": []}
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
    print(f"state: {size:.2f} GiB in {len(state['model'])} tensors; {args.rounds} rounds, medians:")
    for name, label in [
        ("torch.save", "plain torch.save (baseline)"),
        ("sync", "Checkpointer.save, blocking"),
        ("async stall", "Checkpointer.save, background: stall"),
        ("async write", "Checkpointer.save, background: until complete"),
    ]:
        median = statistics.median(out[name])
        print(f"  {label:<48} {median:7.3f} s  ratio {median / base:6.3f}x")
    stall, sync = statistics.median(out["async stall"]), statistics.median(out["sync"])
    print(f"  background stall / blocking Checkpointer.save: {stall / sync:.3f}x (target <= 0.05)")
    print(f"  (first background save, allocating its buffers: stall {cold:.3f} s, ratio {cold / base:.3f}x)")


if __name__ == "__main__":
    main()
