"""`ddpctl scale SPEC --nodes 1,2[,4...] [--nproc N] [--steps N]`: the same job at each size, one after the other;
steady-state samples/s from the progress records; a table, scaling.json and scaling.png."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_spec_args, backend_choices

POLL_S = 1.0


def sizes(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"got {text!r}, expected distinct node counts >= 1 like 1,2,4")
    return values


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "scale",
        help="run a job at several sizes and report speedup and efficiency",
        description="Submits the spec once per size (nodes x nproc), one after the other, each "
        "to its own run dir. Needs ranks that report progress (runtime.Heartbeat).",
    )
    add_spec_args(parser)
    parser.add_argument("--nodes", type=sizes, required=True, metavar="N,N,...", help="node counts, e.g. 1,2,4")
    parser.add_argument("--nproc", type=int, metavar="N", help="processes per node (default: the spec's)")
    parser.add_argument(
        "--steps", type=int, metavar="N", help="cancel each run once every rank passed step N (default: let it finish)"
    )
    parser.add_argument("--warmup", type=int, default=5, metavar="N", help="steps excluded as warm-up (default 5)")
    parser.add_argument("--backend", choices=backend_choices(), help="override the spec's backend")
    parser.add_argument("--out", type=Path, help="where scaling.json/png go (default <run_dir>/<name>-scale)")
    parser.set_defaults(func=run)


def check_args(args: argparse.Namespace) -> None:
    from ddpctl.errors import DdpctlError

    if args.nproc is not None and args.nproc < 1:
        raise DdpctlError(f"scale --nproc: got {args.nproc}, expected an integer >= 1")
    if args.steps is not None and args.steps <= args.warmup + 1:
        raise DdpctlError(f"scale --steps: got {args.steps}, expected more than --warmup + 1 ({args.warmup + 1})")


def size_spec(spec: Any, nodes: int, nproc: int | None) -> Any:
    """The spec at one size: its own name (so its own run dirs) and the default checkpoint dir inside its run dir,
    so no size resumes from another's checkpoint."""
    return dataclasses.replace(
        spec,
        nodes=nodes,
        nproc_per_node=nproc or spec.nproc_per_node,
        name=f"{spec.name}-scale-n{nodes}",
        checkpoint=dataclasses.replace(spec.checkpoint, dir=None),
    )


def measure(spec: Any, steps: int | None, warmup: int) -> Any:
    from ddpctl import api
    from ddpctl.health.rates import steady_samples_per_s
    from ddpctl.health.records import latest_attempt, progress_records
    from ddpctl.health.scaling import SizeResult
    from ddpctl.run.layout import RunLayout

    with deferred_interrupt() as pressed:  # a Ctrl-C during the submission acts once the job is known
        # Recorded in the registry: `ddpctl logs/status` work on each size's run. Scale's own sizes, one at a time
        # under names it derives: submitted as planned, without `submit`'s name check and script warning.
        job = api.submit_plan(api.plan(spec))
    record = job.record
    print(f"  {spec.nodes} node(s) x {spec.nproc_per_node}: job {record.job_id}, run dir {record.run_dir}", flush=True)
    layout = RunLayout(Path(record.run_dir))
    try:
        if pressed:
            raise KeyboardInterrupt
        state = follow(job, layout, spec.world_size, steps)
    except KeyboardInterrupt:
        interrupted(job, spec.nodes)
        raise
    attempt = latest_attempt(layout)
    records = progress_records(layout, attempt) if attempt is not None else {}
    rate = steady_samples_per_s(records, warmup) if len(records) == spec.world_size else None
    return SizeResult(spec.nodes, spec.world_size, record.job_id, state.state, rate)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[list[int]]:
    """SIGINT is noted, not raised, inside the block: the caller acts on it once it can clean up."""
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: pressed.append(signum))
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, previous)


def follow(job: Any, layout: Any, world_size: int, steps: int | None) -> Any:
    """Poll one size's job until it ends, cancelling it once every rank passed `steps`; its final state."""
    from ddpctl.backends import current_state
    from ddpctl.health.records import latest_attempt, progress_records

    cancelled = False
    while not (state := current_state(job.record)).terminal:
        attempt = latest_attempt(layout)
        records = progress_records(layout, attempt) if attempt is not None else {}
        reached = len(records) == world_size and all((r.get("step") or 0) >= (steps or 0) for r in records.values())
        if steps is not None and reached and not cancelled:
            time.sleep(1.5)  # one more record write, so the history holds step N
            job.cancel()
            cancelled = True
        time.sleep(POLL_S)
    return state


def interrupted(job: Any, nodes: int) -> None:
    """Ctrl-C: cancel the size being measured (nothing else of scale's is running), as the benchmarks do, and
    say so; the sizes not yet started are never submitted."""
    import sys

    from ddpctl.errors import DdpctlError

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave the cancel half done
    try:
        job.cancel()
        what = f"cancelled job {job.job_id} ({nodes} node(s))"
    except DdpctlError as err:  # it ended meanwhile, or the scheduler refused: say which
        what = f"job {job.job_id} ({nodes} node(s)) not cancelled: {err}"
    print(f"ddpctl scale: interrupted: {what}; no further sizes submitted", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.health.scaling import table, with_speedups, write_json, write_png

    check_args(args)
    spec = api.plan(args.spec, backend=args.backend, overrides=args.overrides).spec
    out = args.out or Path(spec.run_dir) / f"{spec.name}-scale"
    results = []
    for nodes in args.nodes:
        results.append(measure(size_spec(spec, nodes, args.nproc), args.steps, args.warmup))
    results = with_speedups(results)
    print(table(results))
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "name": spec.name,
        "spec": str(Path(args.spec).resolve()),
        "steps": args.steps,
        "warmup": args.warmup,
        "backend": spec.backend,
        "time": time.time(),
    }
    write_json(out / "scaling.json", results, meta)
    print(f"wrote {out / 'scaling.json'}")
    why = write_png(out / "scaling.png", results, spec.name)
    print(f"wrote {out / 'scaling.png'}" if why is None else f"scaling.png not written: {why}")
    missing = [r for r in results if r.samples_per_s is None]
    for r in missing:
        print(
            f"no steady-state rate at {r.nodes} node(s) (job {r.job_id}, {r.state}): too few progress records "
            f"after warm-up, or ranks that never report (runtime.Heartbeat)"
        )
    return 1 if missing else 0
