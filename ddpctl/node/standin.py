"""A torch-free stand-in for torchrun and its workers: TEST AND BENCHMARK USE ONLY.

`ddpctl launch` starts it instead of torchrun when the spec's env sets `DDPCTL_STANDIN=1` (see
`ddpctl.node.torchrun.torchrun_argv`); everything else — `ddpctl submit`, the batch script, the launchers, the
stop fan-out, events and the requeue decision — is the real code. One process plays a node's N ranks, so this
machine can host 64 nodes x 8 ranks where it could never import torch 512 times. As far as ddpctl can tell it
is N ranks:
- rank-<r>.log (appended, a header line like the real worker's, `--lines` lines per rank per step),
  rank-<r>.json placement beside it and the listen marker (`stopflag.announce_listener`, as StopAgreement);
- the stop signal and the node's stop file arm `ddpctl.runtime.stopflag`, exactly as in a real worker;
- agreed stop: the nodes agree through files in the shared attempt dir (`standin/`): the first node to see the
  request announces it, every node proposes its current step, all run to the largest proposal (what the
  all-reduce of `StopAgreement` gives), record their checkpoint, node 0 writes the checkpoint marker
  (`checkpoints/standin.json`) and `stopped.json` + the `stop` event as `ddpctl.runtime.requeue` does, and every
  node exits 0;
- a later attempt resumes after the step in the checkpoint marker ("resumed from step S");
- `--fail-node K --fail-step S` makes node K exit 1 at step S (a crash), for the failure paths.
Each node also records when it first saw the stop (`standin/seen-node-<k>.json`) for the scale benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from ddpctl import safeio
from ddpctl.run import envvars, history
from ddpctl.run.history import Stopped
from ddpctl.run.layout import RunLayout, rank_info_of
from ddpctl.runtime import stopflag

POLL_S = 0.02
AGREE_TIMEOUT_S = 120.0  # a node that never proposes (it died) must not keep the others forever


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ddpctl.node.standin")
    p.add_argument("--nnodes", type=int, required=True)
    p.add_argument("--nproc-per-node", type=int, required=True)
    p.add_argument("--node-rank", type=int, required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-s", type=float, default=0.1)
    p.add_argument("--lines", type=int, default=1, help="lines per rank per step")
    p.add_argument("--fail-node", type=int, default=-1)
    p.add_argument("--fail-step", type=int, default=-1)
    return p.parse_args(argv)


def on_step(step: int) -> None:
    """Hook for a progress/heartbeat mechanism (none on this branch): called once per step, like a real loop."""


class StandinNode:
    def __init__(self, args: argparse.Namespace, env: Mapping[str, str]) -> None:
        self.args = args
        self.layout = RunLayout(Path(env[envvars.RUN_DIR]))
        self.attempt = int(env.get(envvars.ATTEMPT, "0"))
        self.ckpt = Path(env.get(envvars.CKPT_DIR) or self.layout.default_checkpoints) / "standin.json"
        self.shared = self.layout.attempt_dir(self.attempt) / "standin"
        self.shared.mkdir(parents=True, exist_ok=True)
        self.node = env.get(envvars.NODE_NAME, "?")
        first = args.node_rank * args.nproc_per_node
        self.ranks = range(first, first + args.nproc_per_node)
        pattern = env.get(envvars.RANK_LOG) or self.layout.rank_log_pattern(self.attempt)
        self.logs: list[IO[str]] = []
        for local, rank in enumerate(self.ranks):
            path = Path(pattern.format(rank=rank))
            fd = safeio.open_append(path, 0o644)
            self.logs.append(os.fdopen(fd, "a", buffering=1))
            safeio.write_json_atomic(
                rank_info_of(path), {"rank": rank, "local_rank": local, "group_rank": args.node_rank, "node": self.node}
            )
            # As a rank using StopAgreement does: `ddpctl preempt` waits for a rank that listens for stops.
            stopflag.announce_listener("ddpctl.node.standin (agreed stop)", {**env, "RANK": str(rank)})
        self.say(
            f"[ddpctl.worker] rank={{rank}} attempt={self.attempt} node={self.node} pid={os.getpid()} "
            "script=ddpctl.node.standin"
        )
        self.seen_recorded = False

    def say(self, line: str) -> None:
        for rank, log in zip(self.ranks, self.logs, strict=True):
            log.write(line.replace("{rank}", str(rank)) + "\n")

    def resume_step(self) -> int:
        try:
            step = json.loads(self.ckpt.read_text())["step"]
        except (OSError, ValueError, KeyError, TypeError):
            return 0
        self.say(f"[standin] resumed from step {step}")
        return int(step)

    def stop_wanted(self) -> bool:
        own = stopflag.stop_requested()
        if not own and not (self.shared / "requested").exists():
            return False
        if not self.seen_recorded:  # once: when this node's ranks first knew (own flag, or another node's)
            self.seen_recorded = True
            seen = stopflag.stop_time() if own else time.time()
            source = stopflag.stop_source() if own else "another node"
            if own:
                (self.shared / "requested").touch()
            safeio.write_json_atomic(
                self.shared / f"seen-node-{self.args.node_rank}.json", {"t": seen, "source": source, "node": self.node}
            )
            self.say(f"[standin] stop seen at t={seen:.3f} ({source})")
        return True

    def step(self, step: int) -> None:
        time.sleep(self.args.step_s)
        for _ in range(self.args.lines):
            self.say(f"[standin] step {step}/{self.args.steps} T={time.time():.6f}")
        on_step(step)

    def wait_all(self, prefix: str) -> list[Path]:
        deadline = time.monotonic() + AGREE_TIMEOUT_S
        while True:
            found = [self.shared / f"{prefix}-{k}" for k in range(self.args.nnodes)]
            if all(p.exists() for p in found) or time.monotonic() > deadline:
                return [p for p in found if p.exists()]
            time.sleep(POLL_S)

    def agreed_stop(self, step: int) -> int:
        """Propose this node's step, agree on the largest, run to it, checkpoint; node 0 records the stop."""
        safeio.write_json_atomic(self.shared / f"propose-{self.args.node_rank}", {"step": step})
        target = max(json.loads(p.read_text())["step"] for p in self.wait_all("propose"))
        while step < target:
            step += 1
            self.step(step)
        self.say(f"[standin] agreed stop at step {target}: checkpoint written")
        (self.shared / f"ckpt-{self.args.node_rank}").touch()
        marker = self.layout.stopped_marker(self.attempt)
        if self.args.node_rank == 0:
            self.wait_all("ckpt")
            self.ckpt.parent.mkdir(parents=True, exist_ok=True)
            safeio.write_json_atomic(self.ckpt, {"step": target})
            seen = [json.loads(p.read_text())["t"] for p in self.shared.glob("seen-node-*.json")]
            record = {
                "step": target,
                "checkpoint": str(self.ckpt),
                "signal_time": min(seen, default=None),
                "source": stopflag.stop_source() or "another rank",
                "attempt": self.attempt,
                "world_size": self.args.nnodes * self.args.nproc_per_node,
                "time": time.time(),
            }
            safeio.write_json_atomic(marker, record)
            history.append(self.layout.events, Stopped.from_marker(record))
        deadline = time.monotonic() + AGREE_TIMEOUT_S
        while not marker.exists() and time.monotonic() < deadline:  # the barrier after the marker
            time.sleep(POLL_S)
        return 0

    def run(self) -> int:
        step = self.resume_step()
        while step < self.args.steps:
            if self.stop_wanted():
                return self.agreed_stop(step)
            step += 1
            self.step(step)
            if self.args.node_rank == self.args.fail_node and step == self.args.fail_step:
                self.say(f"[standin] failing at step {step}")
                return 1
        if self.args.node_rank == 0:
            self.ckpt.parent.mkdir(parents=True, exist_ok=True)
            safeio.write_json_atomic(self.ckpt, {"step": step})
        self.say(f"[standin] finished {step} steps")
        return 0


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    stopflag.watch_from_env(env)
    return StandinNode(args, env).run()


if __name__ == "__main__":
    sys.exit(main())
