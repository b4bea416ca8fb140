"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse

SubParsers = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="job spec YAML file (e.g. jobs/example.yaml)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a spec key, value parsed as YAML (repeatable): --set nodes=4 --set nccl.socket_ifname=ib0",
    )
