"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse
import sys

from ddpctl.cli.completion import complete_set, complete_with, job_refs


def add_spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="job spec YAML file (e.g. jobs/example.yaml)")
    complete_with(
        parser.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a spec key, value parsed as YAML (repeatable): --set nodes=4 --set nccl.socket_ifname=ib0",
        ),
        complete_set,
    )


def add_job_arg(parser: argparse.ArgumentParser, help_text: str = "job id or name", **kwargs: object) -> None:
    """The JOB argument of status, logs, cancel, preempt; completed from the registry."""
    complete_with(parser.add_argument("job", help=help_text, **kwargs), job_refs)  # type: ignore[arg-type]


def note(text: str) -> None:
    """A line for the person at the terminal (stderr, so stdout stays the command's answer)."""
    print(text, file=sys.stderr, flush=True)
