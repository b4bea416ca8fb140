"""`python -m ddpctl.node.checkprog`: one node's preflight check, run by its launcher before torchrun when the
spec asks for it (`ddpctl.node.nodecheck` decides when, and records the result).

It runs in the workers' interpreter (the spec's `python`, inside the container where there is one) with
torchrun's environment, so it proves what training needs there:

0. `site`: the spec's `health.node_check`, the site's own command (`/bin/sh -c`, its output to the node's log, its
   last lines in the result), within `health.node_check_timeout_s`; `hardware`: the built-in checks of
   `ddpctl.node.hwcheck` (InfiniBand ports, the run and checkpoint dirs' space and writability, NVML's GPU health);
1. `python`: torch imports;
2. `gpu` (with `gpus_per_node` > 0): the node sees that many GPUs and each runs a small kernel;
3. with more than one node, the network: node 0 serves a store on a port of its own (published in the run dir:
   a fixed port could be another job's), every other node connects to it (`reach`), all join one Gloo group
   (`join`) and all-reduce their verdicts (`allreduce`), each within the spec's bound. A node whose own checks
   failed still joins, so every node learns of it at once instead of waiting out the bound. With a node check, the
   bound grows by its timeout: another node may still be running its own.

The result goes to a JSON file (`RunLayout.check_result`), what torch says to the node's log. Exit status 0 when
this node and, by the all-reduce, every node passed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddpctl import proc, safeio
from ddpctl.errors import CommandError
from ddpctl.node import hwcheck

PORT_POLL_S = 0.1
WHY_MAX = 300
OUTPUT_KEEP = 64 << 10  # the node check's output kept for the node's log; what came before is counted, not kept
OUTPUT_LINES = 5  # its last lines kept in the result (the `preflight` event)
LINE_MAX = 200
SYS_ROOT = Path("/sys")
CANNOT_START = (126, 127)  # the shell's own statuses: found but not executable, not found


class Failed(Exception):
    def __init__(self, stage: str, why: str) -> None:
        super().__init__(why)
        self.stage, self.why = stage, why[:WHY_MAX]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ddpctl.node.checkprog")
    parser.add_argument("--result", required=True, type=Path)
    parser.add_argument("--store-file", required=True, type=Path)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--nnodes", type=int, required=True)
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--node-check", default=None)
    parser.add_argument("--node-check-timeout", type=float, default=0.0)
    parser.add_argument("--disk", type=Path, action="append", default=[])  # the run and checkpoint dirs
    # The check during training (ddpctl.node.recheck): the site's and the built-in checks only, no torch, no network.
    parser.add_argument("--local-only", action="store_true")
    return parser.parse_args(argv)


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def check_gpus(torch: Any, wanted: int) -> None:
    if not torch.cuda.is_available():
        raise Failed("gpu", f"torch.cuda.is_available() is False: none of the {wanted} GPUs is usable")
    count = torch.cuda.device_count()
    if count < wanted:
        raise Failed("gpu", f"{count} GPUs visible, {wanted} needed")
    for index in range(wanted):
        try:
            total = torch.ones(1 << 20, device=f"cuda:{index}").sum().item()
        except RuntimeError as err:
            raise Failed("gpu", f"cuda:{index}: {first_line(err)}") from err
        if int(total) != 1 << 20:
            raise Failed("gpu", f"cuda:{index} computed {total} for a sum of {1 << 20}")


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self) -> datetime.timedelta:
        return datetime.timedelta(seconds=max(0.5, self.end - time.monotonic()))

    def passed(self) -> bool:
        return time.monotonic() >= self.end


def published_port(path: Path, deadline: Deadline) -> int:
    """The port node 0's store listens on, from the run dir (shared by the nodes), once it is there."""
    while not deadline.passed():
        record = safeio.read_json(path)
        port = record.get("port") if record else None
        if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            return port
        time.sleep(PORT_POLL_S)
    raise Failed("reach", f"node 0 published no rendezvous port within {deadline.seconds:g} s")


def open_store(dist: Any, args: argparse.Namespace, deadline: Deadline) -> Any:
    if args.node_rank == 0:
        store = dist.TCPStore(args.master_addr, 0, args.nnodes, True, timeout=deadline.left(), wait_for_workers=False)
        safeio.write_json_atomic(args.store_file, {"port": store.port})
        return store
    port = published_port(args.store_file, deadline)
    try:
        return dist.TCPStore(args.master_addr, port, args.nnodes, False, timeout=deadline.left())
    except (RuntimeError, OSError) as err:
        where = f"{args.master_addr}:{port}"
        raise Failed(
            "reach", f"could not reach node 0's store at {where} within {deadline.seconds:g} s: {first_line(err)}"
        ) from err


def agree(torch: Any, args: argparse.Namespace, ok: bool, result: dict[str, Any], deadline: Deadline) -> None:
    """The network stages; sets `reached` and `peers_ok` in result (raises Failed for this node's own part)."""
    import torch.distributed as dist

    store = open_store(dist, args, deadline)
    result["reached"] = True
    # So far, on record: a check ended from outside (srun, once another node failed) still says how far it got.
    safeio.write_json_atomic(args.result, result)
    try:
        # The store is this check's own (a fresh port): no prefix needed to keep it apart from training's.
        dist.init_process_group(
            "gloo", store=store, rank=args.node_rank, world_size=args.nnodes, timeout=deadline.left()
        )
    except (RuntimeError, OSError) as err:
        raise Failed("join", f"not every node joined within {deadline.seconds:g} s: {first_line(err)}") from err
    verdict = torch.tensor([1 if ok else 0])
    try:
        dist.all_reduce(verdict)
    except (RuntimeError, OSError) as err:
        raise Failed("allreduce", f"the all-reduce across {args.nnodes} nodes failed: {first_line(err)}") from err
    result["peers_ok"] = int(verdict[0]) == args.nnodes
    store.add("done", 1)
    # Node 0 serves the store: it stays until every node is through with it (or the bound passes).
    while args.node_rank == 0 and store.add("done", 0) < args.nnodes and not deadline.passed():
        time.sleep(PORT_POLL_S)
    dist.destroy_process_group()


def site_check(command: str, timeout: float) -> tuple[str, list[str], int | None]:
    """Run the site's node check: why it failed ("" when it passed), its last lines and its exit status (None:
    killed at its bound). Its output goes to this program's, the node's log (bounded: the last OUTPUT_KEEP bytes)."""
    print(f"ddpctl preflight: node check (bound {timeout:g} s): {command}", flush=True)
    done = proc.run_bounded(["/bin/sh", "-c", command], keep=OUTPUT_KEEP, timeout=timeout)
    text = done.tail.decode(errors="replace")
    if done.dropped:
        print(f"ddpctl preflight: (the node check's first {done.dropped} bytes not kept)", flush=True)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    lines = [line.strip()[:LINE_MAX] for line in text.splitlines() if line.strip()][-OUTPUT_LINES:]
    last = f"last output: {lines[-1]}" if lines else "no output"
    code = done.returncode
    if code is None:
        return f"node_check outlived its {timeout:g} s bound and was killed; {last}", lines, code
    if code < 0:
        return f"node_check was ended by signal {-code}; {last}", lines, code
    return (f"node_check exited {code}; {last}" if code else ""), lines, code


def fail(result: dict[str, Any], stage: str, why: str) -> None:
    """The first failure is the node's verdict; later stages still run (the network one tells the others)."""
    if result["ok"]:
        result.update(ok=False, stage=stage, why=why[:WHY_MAX])


def local_checks(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """The site's check, then the built-in ones (`hwcheck`), into `result`. During training (`--local-only`) a
    site check that could not start (no shell, or the shell's 126/127: not executable, not found) is recorded as
    `unstarted`, not failed: ddpctl.node.recheck decides what it means."""
    if args.node_check:
        code: int | None = None
        try:
            why, result["output"], code = site_check(args.node_check, args.node_check_timeout)
        except (OSError, CommandError) as err:
            why, code = f"node_check could not start: {first_line(err)}", CANNOT_START[-1]
        if why and getattr(args, "local_only", False) and code in CANNOT_START:
            result["unstarted"] = why[:WHY_MAX]
        elif why:
            fail(result, "site", why)
    if faults := hwcheck.hardware_faults(SYS_ROOT, args.disk, os.environ, args.gpus > 0):
        fail(result, "hardware", "; ".join(faults))


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    result: dict[str, Any] = {"node_rank": args.node_rank, "ok": True, "stage": "", "why": ""}
    local_checks(args, result)
    if args.local_only:
        return {**result, "seconds": round(time.monotonic() - started, 2)}
    try:
        import torch
    except Exception as err:
        fail(result, "python", f"import torch failed: {first_line(err)}")
        return {**result, "seconds": round(time.monotonic() - started, 2)}
    try:
        if args.gpus > 0:
            check_gpus(torch, args.gpus)
    except Failed as failed:
        fail(result, failed.stage, failed.why)
    if args.nnodes > 1:
        result["reached"] = False
        safeio.write_json_atomic(args.result, result)
        try:  # the bound starts here: how long torch takes to import differs from node to node
            agree(torch, args, result["ok"], result, Deadline(args.timeout + args.node_check_timeout))
        except Failed as failed:
            fail(result, failed.stage, failed.why)
    result["seconds"] = round(time.monotonic() - started, 2)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = run(args)
    safeio.write_json_atomic(args.result, result)
    print(f"ddpctl preflight: {json.dumps(result, sort_keys=True)}", flush=True)
    return 0 if result["ok"] and result.get("peers_ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
