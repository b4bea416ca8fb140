"""`ddpctl env [--json] [--nproc-per-node N] [--resolve]`: what this node of a Slurm job step gives torchrun.

Run it under srun to see MASTER_ADDR/MASTER_PORT/NODE_RANK/... exactly as `ddpctl launch` derives them.
Outside a job step it fails with one line and exit status 2. Imports neither torch nor rich.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from ddpctl.errors import DdpctlError

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
        help=f"processes per node (default: ${NPROC_VAR}, else $SLURM_GPUS_ON_NODE if > 0, else 1)",
    )
    parser.add_argument("--resolve", action="store_true", help="show MASTER_ADDR as an IPv4 address")
    parser.set_defaults(func=run)


def nproc_per_node(flag: int | None, env: Mapping[str, str]) -> int:
    """The flag, else DDPCTL_NPROC_PER_NODE, else SLURM_GPUS_ON_NODE when positive, else 1."""
    if flag is not None:
        return flag
    raw = env.get(NPROC_VAR, "").strip()
    if raw:
        try:
            return _positive_int(raw)
        except argparse.ArgumentTypeError:
            raise DdpctlError(f"{NPROC_VAR}={raw!r} is not a positive integer") from None
    from ddpctl.slurm.env import gpus_on_node  # lazily: every other command pays for this module's import

    gpus = gpus_on_node(env)
    return gpus if gpus else 1


def show(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    from ddpctl.slurm.env import derive

    resolve = socket.gethostbyname if args.resolve else None
    dist = derive(env, nproc_per_node(args.nproc_per_node, env), resolve_addr=resolve)
    if args.json:
        return json.dumps(dist.as_json())
    return "\n".join(dist.as_lines())


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(show(args, dict(os.environ)) + "\n")
    return 0
