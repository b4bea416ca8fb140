"""Per-step cost of PyTorch's flight recorder (TORCH_FR_BUFFER_SIZE, which `ddpctl launch` turns on) in DDP on Gloo.

The recorder is process-wide and read from the environment once, so each variant is its own pair of processes
(2 ranks, Gloo, one small DDP model each): `off` (TORCH_FR_BUFFER_SIZE=0) and `on` (the launch default, 2000
entries), two pairs of each (the A/A noise floors: pairs of one variant differ by where their processes run). The
four pairs train in blocks of steps, one pair at a time, in an order rotated every round, so drift in the
machine's load hits all alike. Prints each pair's median step (rank 0's wall clock, and its training thread's
CPU time, which a loaded machine's preemptions do not inflate) and the ratio on/off of the pairs' sums (target:
<= 1.01x), and what one rank's recorder holds at the end.

    python benchmarks/bench_flight_recorder.py [--steps 20] [--rounds 40] [--width 256]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import time
from typing import Any

from ddpctl.node.torchrun import FR_BUFFER_DEFAULT

VARIANTS = {"off": "0", "on": str(FR_BUFFER_DEFAULT), "off2": "0", "on2": str(FR_BUFFER_DEFAULT)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_main(rank: int, port: int, shape: tuple[int, int], orders: Any, results: Any) -> None:
    """One rank of a pair: a block of `steps` DDP steps per "run" order; rank 0 sends the times."""
    width, steps = shape
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, width), torch.randn(64, 1)
    while orders.get() == "run":
        times = []
        for _ in range(steps):
            start, cpu = time.perf_counter(), time.thread_time()
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
            times.append((time.perf_counter() - start, time.thread_time() - cpu))
        if rank == 0:
            results.put(times)
    if rank == 0:
        from torch._C import _distributed_c10d as c10d

        held = json.loads(c10d._dump_fr_trace_json())  # type: ignore[attr-defined]
        results.put(len(held.get("entries", [])))
    dist.destroy_process_group()


def start(ctx: Any, args: argparse.Namespace) -> dict[str, tuple[list[Any], Any, list[Any]]]:
    pairs = {}
    for name, size in VARIANTS.items():
        os.environ["TORCH_FR_BUFFER_SIZE"] = size  # a spawned child takes the environment as it is at start
        port, orders, results = free_port(), [ctx.Queue(), ctx.Queue()], ctx.Queue()
        shape = (args.width, args.steps)
        procs = [ctx.Process(target=rank_main, args=(r, port, shape, orders[r], results)) for r in (0, 1)]
        for proc in procs:
            proc.start()
        pairs[name] = (orders, results, procs)
    return pairs


def stop(pairs: dict[str, tuple[list[Any], Any, list[Any]]]) -> dict[str, int]:
    """Ends the pairs; what rank 0's recorder of each held at the end."""
    held = {}
    for name, (orders, results, procs) in pairs.items():
        for queue in orders:
            queue.put("stop")
        held[name] = results.get(timeout=60)
        for proc in procs:
            proc.join(timeout=60)
    return held


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20, help="steps per block")
    p.add_argument("--rounds", type=int, default=40, help="blocks per variant")
    p.add_argument("--width", type=int, default=256)
    args = p.parse_args()
    pairs = start(mp.get_context("spawn"), args)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for index in range(args.rounds + 1):
        names = list(VARIANTS)
        for name in names[index % 4 :] + names[: index % 4]:  # each pair in each place of the order in turn
            orders, results, _ = pairs[name]
            for queue in orders:
                queue.put("run")
            block = results.get(timeout=600)
            if index:  # the first block of each warms its model up
                times[name].extend(block)
    held = stop(pairs)
    print(f"steps per variant: {len(times['off'])} (alternating blocks of {args.steps}), width {args.width}, 2 ranks")
    for index, what in enumerate(("wall time", "CPU time of the training thread")):
        off, on, off2, on2 = (statistics.median(t[index] for t in times[n]) for n in VARIANTS)
        print(f"{what}: median step off {off * 1e3:.3f} / {off2 * 1e3:.3f} ms, on {on * 1e3:.3f} / {on2 * 1e3:.3f} ms")
        ratio = (on + on2) / (off + off2)
        floors = f"off2/off {off2 / off:.4f}x, on2/on {on2 / on:.4f}x"
        print(f"  ratio on/off = {ratio:.4f}x (target <= 1.01x); A/A noise floors {floors}")
    print(f"entries held by rank 0's recorder at the end: off {held['off']}, on {held['on']}")


if __name__ == "__main__":
    main()
