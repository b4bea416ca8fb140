"""`ddpctl env [--json] [--nproc-per-node N] [--run-dir DIR] [--resolve]`: what this node of a Slurm job step
gives torchrun.

Run it under srun to see MASTER_ADDR/MASTER_PORT/NODE_RANK/... exactly as `ddpctl launch` derives them.
Processes per node: the flag; else, inside a ddpctl run ($DDPCTL_RUN_DIR, or --run-dir), the run's
nproc_per_node through the very function `launch` uses (`ddpctl.node.rundist.run_dist`); else
$DDPCTL_NPROC_PER_NODE; else one per GPU counted alike on every node (`ddpctl.slurm.stepshape.default_nproc`:
the job's --gpus-per-node, or this node's GPUs in a one-node step; refused when nodes may differ).
Outside a job step, or in a step with more than one task per node, it fails with one line and exit status 2.
Imports neither torch nor rich.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ddpctl.errors import DdpctlError
from ddpctl.run import envvars

NPROC_VAR = "DDPCTL_NPROC_PER_NODE"


def _positive_int(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "env",
        help="show the torchrun settings (MASTER_ADDR, NODE_RANK, ...) of this Slurm job step",
        description="Derive MASTER_ADDR, MASTER_PORT, NODE_RANK, NNODES, WORLD_SIZE ... from the SLURM_* "
        "variables of this job step, as `ddpctl launch` does. Run it under srun.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object, not KEY=value lines")
    parser.add_argument(
        "--nproc-per-node",
        type=_positive_int,
        metavar="N",
        help=f"processes per node (default: the run's nproc_per_node inside a ddpctl run, else ${NPROC_VAR}, "
        "else $SLURM_GPUS_PER_NODE, else $SLURM_GPUS_ON_NODE in a one-node step, else 1)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        metavar="DIR",
        help=f"derive as `ddpctl launch DIR` does (default: ${envvars.RUN_DIR}, set inside a run's workers)",
    )
    parser.add_argument("--resolve", action="store_true", help="show MASTER_ADDR as an IPv4 address")
    parser.set_defaults(func=run)


def nproc_per_node(flag: int | None, env: Mapping[str, str]) -> int:
    """Outside a run: the flag, else DDPCTL_NPROC_PER_NODE, else `stepshape.default_nproc` (GPUs counted
    alike on every node), else 1."""
    if flag is not None:
        return flag
    raw = env.get(NPROC_VAR, "").strip()
    if raw:
        try:
            return _positive_int(raw)
        except argparse.ArgumentTypeError:
            raise DdpctlError(f"{NPROC_VAR}={raw!r} is not a positive integer") from None
    # lazily: every other command pays for these modules' import
    from ddpctl.slurm.env import SlurmContext
    from ddpctl.slurm.stepshape import default_nproc

    ctx = SlurmContext.from_env(env)  # not in a step: its one-line refusal comes first
    return default_nproc(env, ctx.step_num_nodes or ctx.num_nodes)


def run_dir_of(args: argparse.Namespace, env: Mapping[str, str]) -> Path | None:
    if args.run_dir is not None:
        return Path(args.run_dir)
    raw = env.get(envvars.RUN_DIR, "")
    return Path(raw) if raw else None


def env_listing(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    resolve = socket.gethostbyname if args.resolve else None
    run_dir = run_dir_of(args, env)
    if run_dir is not None and args.nproc_per_node is None:
        from ddpctl.node.rundist import run_dist, run_node_spec
        from ddpctl.run.layout import RunLayout

        dist = run_dist(run_node_spec(RunLayout(run_dir.resolve())), env, resolve_addr=resolve)
    else:
        from ddpctl.slurm.env import derive

        dist = derive(env, nproc_per_node(args.nproc_per_node, env), resolve_addr=resolve)
    if args.json:
        return json.dumps(dist.as_json())
    return "\n".join(dist.as_lines())


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(env_listing(args, dict(os.environ)) + "\n")
    return 0
