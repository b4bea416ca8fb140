"""`ddpctl env` (not implemented yet)."""

from __future__ import annotations

import argparse
from typing import Any


def add(sub: Any) -> None:
    parser = sub.add_parser("env", help="(not implemented yet)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError("env")
