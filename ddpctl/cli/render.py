"""`ddpctl render SPEC [--set ...] [-o FILE]`: print or write the batch script a spec renders to."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_spec_args, backend_choices, imports_uncollected


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "render",
        help="print the batch script a job spec renders to",
        description="Render the spec's sbatch template (no submission).",
    )
    add_spec_args(parser)
    parser.add_argument(
        "--backend",
        choices=backend_choices(),
        help="the backend to render for (default: the spec's); only sbatch submits a batch script",
    )
    parser.add_argument("-o", "--output", type=Path, help="write to FILE (atomically) instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The spec layer, not ddpctl.api: rendering needs no backend, registry or logs machinery, and `render` is
    # run as a fresh process (api.load_spec does exactly this: read, override, validate, resolve against cwd).
    with imports_uncollected("ddpctl.plan.render"):
        from ddpctl.plan.render import render_for
        from ddpctl.spec import load_spec, resolve_paths
        from ddpctl.spec.capabilities import SCRIPT

    overrides = [*args.overrides, *([f"backend={args.backend}"] if args.backend else [])]
    spec = resolve_paths(load_spec(args.spec, overrides), Path.cwd())
    if args.backend is not None and spec.capabilities.submits != SCRIPT:
        from ddpctl.errors import SpecError

        raise SpecError(
            f"render --backend {args.backend}: that backend submits no batch script of ours; "
            f"`ddpctl submit {args.spec} --backend {args.backend} --dry-run` prints what it runs"
        )
    text = render_for(spec)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    from ddpctl.errors import SpecError
    from ddpctl.safeio import describe, write_text_atomic

    try:
        write_text_atomic(args.output, text)
    except OSError as err:
        raise SpecError(f"-o {args.output}: cannot write the script: {describe(err).split(': ', 1)[-1]}") from err
    return 0
