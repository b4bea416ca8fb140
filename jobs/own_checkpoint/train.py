"""A plain torch.distributed script in the tutorials' style, with its own checkpointing (no ddpctl.runtime).

Rank 0 saves `checkpoint.pt` every --save-every steps (torch.save to a temporary file, then rename) and all ranks
wait at a barrier; a (re)started run resumes from that file when it exists. With --handle-signal it also stops
cleanly when it gets SIGUSR1 — the signal ddpctl sends it when the spec says `requeue.script_signal: USR1`: the
ranks agree to stop (an all_reduce of the flag, the same step on every rank), save, and exit 0. Without it, it is
the plain script that ignores stops.

    ddpctl submit jobs/own-checkpoint.yaml
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STOP = {"requested": False}


def on_signal(_signum: int, _frame: FrameType | None) -> None:
    STOP["requested"] = True  # only a flag: the save happens in the loop, at a step every rank agrees on


def resume(path: Path, model: DDP, opt: torch.optim.Optimizer, rank: int) -> int:
    if not path.exists():
        return 0
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    if rank == 0:
        print(f"resumed from step {state['step']} (restart {os.environ.get('DDPCTL_RESTART_COUNT', '0')})",
              flush=True)
    return int(state["step"])


def save(path: Path, model: DDP, opt: torch.optim.Optimizer, step: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(".checkpoint.pt.tmp")  # written whole, then renamed: never a torn checkpoint.pt
    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    tmp.replace(path)
    print(f"saved step {step}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--save-every", type=int, default=10, help="0: never save")
    p.add_argument("--sleep", type=float, default=0.2, help="seconds per step")
    p.add_argument("--handle-signal", action="store_true", help="save and exit 0 on SIGUSR1")
    args = p.parse_args()
    if args.handle_signal:
        signal.signal(signal.SIGUSR1, on_signal)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    path = Path(os.environ.get("DDPCTL_CKPT_DIR", "checkpoints")) / "checkpoint.pt"
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = resume(path, model, opt, rank)
    for step in range(start + 1, args.steps + 1):
        x = torch.randn(16, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
        time.sleep(args.sleep)
        flag = torch.tensor([1 if STOP["requested"] else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop = bool(flag.item()) and step < args.steps
        if (args.save_every and step % args.save_every == 0) or stop:
            if rank == 0:
                save(path, model, opt, step)
            dist.barrier()
        if stop:
            if rank == 0:
                print(f"stopping at step {step} for requeue", flush=True)
            dist.destroy_process_group()
            sys.exit(0)
    if rank == 0:
        print(f"done: {args.steps} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
