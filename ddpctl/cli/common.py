"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Iterator

from ddpctl.cli.completion import complete_set, complete_spec, complete_with, job_refs

# `ddpctl sweep results ...` is parsed as this command (here, not in cli.sweep: every start reads it, and only
# `sweep` needs that module).
RESULTS = "sweep-results"


def backend_choices() -> tuple[str, ...]:
    """Every command's --backend choices: the capability table's backends, in its order (here, not in
    cli.submit: `render`, `doctor` and `scale` take --backend too). Read when a parser that takes --backend is
    built, never at start-up: the spec package costs every other command its import time."""
    from ddpctl.spec.capabilities import BACKENDS

    return tuple(BACKENDS)


def add_spec_args(parser: argparse.ArgumentParser, first_words: tuple[str, ...] = ()) -> None:
    """The spec file and `--set`; `first_words`: words completed besides files in the spec's place
    (`sweep results`)."""
    spec = parser.add_argument("spec", help="job spec YAML file (e.g. jobs/example.yaml)")
    if first_words:
        complete_with(spec, lambda prefix, **kw: complete_spec(first_words, prefix, **kw))
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


def print_warning(text: str) -> None:
    """The submit policy's warning (ddpctl.api.submit_checked), as `submit` says it, here or from a cluster."""
    print(f"ddpctl: warning: {text}", file=sys.stderr)


def add_cluster_arg(
    parser: argparse.ArgumentParser,
    help_text: str = "the job of this remote cluster (clusters.yaml): its ddpctl does it over SSH",
) -> None:
    """The --cluster NAME option of every command that a remote cluster's ddpctl can do; `help_text` says what."""
    parser.add_argument("--cluster", metavar="NAME", help=help_text)


def remote_ref(args: argparse.Namespace) -> bool:
    """Whether `args.job` names no job of the local registry (id, name or sweep) but one submitted from here to
    a remote cluster: then `args` name it there. Asked before the local machinery is imported (`api.job` would
    find it too, `found_remote`), so a remote job's command costs what its `--cluster` form costs."""
    if args.cluster or args.job is None:
        return False
    from ddpctl.remote.jobs import find_recorded, recorded
    from ddpctl.run.registry import Registry
    from ddpctl.run.sweeps import named_task

    ref, records = args.job, Registry.from_env().records()
    if any(ref in (r.job_id, r.name, r.sweep) for r in records) or named_task(records, ref)[0]:
        return False
    found = find_recorded(ref, recorded())
    if found is None:
        return False
    args.cluster, args.job = found.cluster, found.job_ref  # a sweep: its array job id there
    return True


def found_remote(args: argparse.Namespace, job: object) -> bool:
    """Whether `job` (from `api.job`) is one submitted here to a remote cluster: then `args` name it there (its
    cluster, its id) and the command takes its `--cluster` path: its run dir is read by that cluster's ddpctl."""
    from ddpctl.api.remote import RemoteJob

    if not isinstance(job, RemoteJob):
        return False
    args.cluster, args.job = job.cluster, job.job_id
    return True


def remote_text(cluster: str, words: list[str], timeout: float = 60.0) -> int:
    """The cluster's ddpctl runs `words`; what it printed is shown here made visible, with its exit status."""
    from ddpctl import __version__
    from ddpctl.remote.passthrough import run_remote

    shown = run_remote(cluster, words, __version__, as_json=False, timeout=timeout)
    if shown.out:
        print(shown.out)
    return shown.code


def refuse_sweep(command: str, ref: str | None) -> None:
    """`top SWEEP`, `logs SWEEP`, `preempt SWEEP`: a sweep is many runs, so one line naming its tasks rather than
    picking one of them by the name's rules (`status` and `cancel` take the whole sweep)."""
    if ref is None:
        return
    from ddpctl.api.sweeps import find_sweep
    from ddpctl.errors import ArgumentError
    from ddpctl.run.sweeps import task_list

    sweep = find_sweep(ref)
    if sweep is not None:
        raise ArgumentError(
            f"{command} {ref}: sweep {sweep.name} (job array {sweep.array_job}) has {len(sweep.jobs)} tasks; name "
            f"one: {task_list([job.record for job in sweep.jobs])} (or {sweep.name}_<task>)"
        )


@contextlib.contextmanager
def imports_uncollected(module: str) -> Iterator[None]:
    """Run a command's own imports with the cyclic garbage collector paused, then freeze what they made.

    A fresh process of a short command (`render`: benchmarks/bench_render.py) spends most of its life importing.
    The tens of thousands of objects the imports make (modules, classes, functions) live until the process
    exits, yet each automatic collection on the way and the one at exit would scan them again, finding nothing.
    Paused, then frozen (`gc.freeze`: left out of every later collection), they are scanned by none; what the
    command does with its input afterwards is collected as usual. Only where `module` is not imported yet: a
    process that has it already (a test calling `main` in-process) is left as it is.
    """
    if module in sys.modules or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
