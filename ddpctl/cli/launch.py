"""`ddpctl launch RUN_DIR`: node-side launcher, started once per node by the batch script's srun."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "launch",
        help="(node side) start torchrun for this node of a submitted job",
        description="Run inside a job step, one task per node: derives the distributed environment from "
        "Slurm's variables and starts torchrun with per-rank logs under RUN_DIR.",
    )
    parser.add_argument("run_dir", type=Path, help="the job's run directory (holds job.yaml)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl.node.launch import launch

    return launch(args.run_dir.resolve(), dict(os.environ))
