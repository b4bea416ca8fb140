"""ddpctl's Python API, for notebooks, sweeps and other tools; the `ddpctl` command line is built on it.

    import ddpctl

    spec = ddpctl.load_spec("jobs/example.yaml", overrides=["nodes=2"])
    job = ddpctl.submit(spec, backend="local")          # or ddpctl.submit("jobs/example.yaml", ...)
    final = job.wait(timeout=600)                       # JobState: .state, .restarts, .exit_code, ...
    for line in job.logs(rank=0):                       # LogLine(attempt, node, rank, text)
        print(line.text)
    ddpctl.job("example").status()                      # any job in the registry, by name or id

Errors are the typed exceptions of `ddpctl.errors` (all `DdpctlError`): `str(err)` is the one line the CLI
prints for it. Nothing here imports torch, rich or submitit unless the chosen backend needs it.

`ddpctl.api.sweeps`: `sweep`, one Slurm job array over a grid of values (local backend: a detached queue on this
machine), and its `Sweep` handle.

Here: getting a job (read a spec, plan, submit, find one in the registry); `ddpctl.api.handle`: the `Job` handle
those return (its state, wait, logs, cancel, preempt).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ddpctl.api.handle import MIN_POLL_S as MIN_POLL_S  # re-exported: ddpctl.api's names stay where they were
from ddpctl.api.handle import Job
from ddpctl.api.handle import seconds_arg as seconds_arg
from ddpctl.api.sweeps import Sweep, sweep
from ddpctl.backends import get_backend
from ddpctl.errors import ArgumentError, JobNotFound
from ddpctl.logs.stream import LogLine
from ddpctl.run.registry import Registry
from ddpctl.spec import JobSpec, resolve_paths, spec_from_mapping, spec_to_mapping
from ddpctl.spec import load_spec as _read_spec
from ddpctl.spec.overrides import Overrides, as_overrides

if TYPE_CHECKING:
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.proc import Pending
    from ddpctl.slurm.cluster import ClusterFacts

__all__ = [
    "Job",
    "LogLine",
    "SpecLike",
    "Sweep",
    "cluster_facts",
    "job",
    "jobs",
    "load_spec",
    "plan",
    "spec_of",
    "submit",
    "submit_checked",
    "submit_plan",
    "sweep",
]

SpecLike = JobSpec | str | Path
Warn = Callable[[str], None]


def load_spec(path: str | Path, overrides: Overrides = (), *, cwd: str | Path | None = None) -> JobSpec:
    """Read, override (`"key.sub=value"` strings as `--set`, or a mapping `{"nodes": 4}`), validate and resolve
    a spec file.

    Relative paths written in the file start at the file's directory; those in `overrides` at `cwd` (default:
    the current directory), as `ddpctl submit` does. Raises `SpecError` naming the file, line, key, value and
    what is allowed.
    """
    return _read_spec(path, as_overrides(overrides), cwd=cwd)


def spec_of(spec_or_path: SpecLike, *, backend: str | None = None, overrides: Overrides = ()) -> JobSpec:
    """The spec `plan()` plans: read (a path), overridden, with `backend` applied and paths resolved."""
    return _spec_of(spec_or_path, overrides, backend)


def _spec_of(spec_or_path: SpecLike, overrides: Overrides, backend: str | None) -> JobSpec:
    extra = [*as_overrides(overrides), *([f"backend={backend}"] if backend else [])]
    if isinstance(spec_or_path, JobSpec):
        if not extra:
            return resolve_paths(spec_or_path, Path.cwd())
        spec = spec_from_mapping(spec_to_mapping(spec_or_path), spec_or_path.source, overrides=extra)
        return resolve_paths(spec, Path.cwd())
    return load_spec(spec_or_path, extra)


def cluster_facts(spec: JobSpec, *, with_nodes: bool = False) -> ClusterFacts:
    """The cluster's facts for this spec's backend, asked once (`ddpctl.slurm.cluster`); the local backend has
    none. `with_nodes`: also each node's GRES (one more controller question, for `doctor`)."""
    from ddpctl.slurm.cluster import ClusterFacts, gather_here

    return gather_here(with_nodes=with_nodes) if spec.capabilities.slurm else ClusterFacts()


def plan(
    spec_or_path: SpecLike,
    *,
    backend: str | None = None,
    overrides: Overrides = (),
    cluster: ClusterFacts | Pending[ClusterFacts] | None = None,
) -> SubmissionPlan:
    """The frozen submission plan: what `submit` would submit, and what `ddpctl submit --dry-run` prints.

    `requeue.mode: auto` is decided here, from the cluster's facts (`plan.requeue_why` says why): `cluster`, or
    (None) gathered by `cluster_facts`. Raises `RequeueModeError` (a `SpecError`) where the backend cannot
    resume the way the spec or cluster needs.
    """
    import dataclasses

    from ddpctl.plan.requeue_mode import resolve_mode
    from ddpctl.proc import Pending, in_background

    spec = _spec_of(spec_or_path, overrides, backend)
    # The facts are controller round trips: asked (or still being asked) while this thread imports the renderer.
    waiting = in_background(lambda: cluster_facts(spec)) if cluster is None else cluster
    from ddpctl.plan import render  # noqa: F401  (imported here, beside the round trips; build() uses it)
    from ddpctl.plan.submission import build

    spec, why = resolve_mode(spec, waiting.result() if isinstance(waiting, Pending) else waiting)
    return dataclasses.replace(build(spec), requeue_why=why)


def submit(
    spec_or_path: SpecLike,
    *,
    backend: str | None = None,
    overrides: Overrides = (),
    cluster: str | None = None,
    allow_duplicate: bool = False,
    warn: Warn | None = None,
) -> Job:
    """Submit a spec (a `JobSpec` or a spec file) and record it in the registry; returns at once.

    The same policy as `ddpctl submit` (`submit_checked`): a live job of the same name refuses it
    (`DuplicateName`) unless `allow_duplicate`, and a partition that can never run it raises `SpecError`.
    `warn` hears the warning `ddpctl submit` prints (a script that does not handle the stop signal; on a cluster,
    after its login node submitted); by default it is a `UserWarning`. `backend` overrides the spec's (`sbatch`,
    `submitit` or `local`). Raises `SpecError` for a bad spec, `BackendUnavailable` when the backend cannot run
    here, `CommandError` when sbatch refuses the job. `cluster` (or the spec's `cluster:`): submit on that
    remote cluster of clusters.yaml over SSH, as `ddpctl submit --cluster` does (a spec file then, not a
    `JobSpec`); the handle is a `RemoteJob`.
    """
    if cluster is not None and not isinstance(cluster, str):
        raise ArgumentError(f"cluster: got {cluster!r}; expected a cluster name of clusters.yaml as a string")
    spec = _spec_of(spec_or_path, overrides, backend)
    if cluster is None and spec.cluster is None:
        return submit_checked(spec, allow_duplicate=allow_duplicate, warn=warn or _warning)[0]
    if isinstance(spec_or_path, JobSpec):
        where = cluster or spec.cluster
        raise ArgumentError(f"cluster {where!r}: give the spec file's path (the cluster reads the file), not a JobSpec")
    import uuid

    from ddpctl.api.remote import chosen, submit_on

    words = [*as_overrides(overrides), *([f"backend={backend}"] if backend else [])]
    job, _sent, outcome = submit_on(
        chosen(cluster, spec), spec, words, tag=uuid.uuid4().hex, allow_duplicate=allow_duplicate
    )
    for text in outcome.warnings:  # the policy ran on the login node: its warnings reach the caller here
        (warn or _remote_warning)(text)
    return job


def submit_checked(spec: JobSpec, *, allow_duplicate: bool, warn: Warn) -> tuple[Job, SubmissionPlan]:
    """The submit policy every submission here goes through (`ddpctl submit`, `submit`, a remote submit's login
    node), then the submission: the job and the plan it submitted. A live job of the same name refuses it;
    the duplicate check and the submission are one step per name (the name's lock in the registry), else
    three simultaneous submits of one name would all pass the check before any of them is recorded."""
    if allow_duplicate:
        return _checked_submit(spec, allow_duplicate=True, warn=warn)
    registry = Registry.from_env()
    registry.check_writable()  # its one line, before the lock file is made beside the registry
    with registry.name_lock(spec.name):
        return _checked_submit(spec, allow_duplicate=False, warn=warn)


def _checked_submit(spec: JobSpec, *, allow_duplicate: bool, warn: Warn) -> tuple[Job, SubmissionPlan]:
    from ddpctl.plan.preflight import check_runnable
    from ddpctl.plan.stopscan import check_script
    from ddpctl.plan.strayckpt import check_relative
    from ddpctl.proc import in_background

    # Every controller round trip starts now and runs while the plan is built: the cluster's facts (asked
    # once: the requeue mode and the partition check both read them) and the duplicate-name check. A plan
    # error is still the one reported first.
    cluster = in_background(lambda: cluster_facts(spec))
    duplicate = in_background(lambda: _check_name(spec, allow_duplicate))
    submission = plan(spec, cluster=cluster)  # one plan, built once: the submission submits it
    check_runnable(spec, cluster.result())  # a partition that can never run the spec: reported before a duplicate name
    duplicate.result()
    if (warning := check_script(submission.spec)) is not None:
        warn(warning)
    if (warning := check_relative(submission.spec, Path.cwd())) is not None:  # the scripts run where submit runs
        warn(warning)
    return submit_plan(submission), submission


def _check_name(spec: JobSpec, allow_duplicate: bool) -> None:
    """A live job of the same name refuses the submission (squeue: a round trip on the way to sbatch)."""
    if not allow_duplicate:
        from ddpctl.backends.names import check_duplicate

        check_duplicate(Registry.from_env(), spec.name)


def _warning(text: str) -> None:
    """The API prints nothing itself: a warning reaches a notebook or a script as Python's warnings do."""
    import warnings

    # Shown at the caller of `submit` (this, _checked_submit, submit_checked, submit, the caller).
    warnings.warn(text, UserWarning, stacklevel=5)


def _remote_warning(text: str) -> None:
    import warnings

    warnings.warn(text, UserWarning, stacklevel=3)  # at the caller of `submit`


def submit_plan(submission: SubmissionPlan) -> Job:
    """Submit exactly this plan (as `plan()` built it) and record it in the registry."""
    backend = get_backend(submission.backend)
    backend.check_available()
    Registry.from_env().check_writable()  # before anything is submitted: an unrecorded job could not be found
    source = Path(submission.spec.source)  # "<spec>" for a spec built in Python: recorded as it is
    record = backend.submit(submission, source.resolve() if source.is_file() else source)
    Registry.from_env().add(record)
    from ddpctl.plan.stopscan import scan_event
    from ddpctl.run import history
    from ddpctl.run.layout import RunLayout

    events = RunLayout(Path(record.run_dir)).events
    history.append(events, history.RequeueModeChosen(mode=submission.spec.requeue.mode, why=submission.requeue_why))
    history.append(events, scan_event(submission.spec))
    return Job(record)


def job(name_or_id: str | None = None, *, warn: Callable[[str], None] | None = None) -> Job:
    """A job from the registry by id, or by name: the running job of that name if there is one, else the
    newest; None: the newest job of all.

    `warn` hears the one line saying which job an ambiguous name chose (when the newest job of that name is not
    its only live one); by default nothing is printed. Raises `JobNotFound` (naming the registry and the names it
    knows) when there is none; `ArgumentError` when `name_or_id` is not a string.
    """
    if name_or_id is not None and not isinstance(name_or_id, str):
        raise ArgumentError(
            f"job: got {type(name_or_id).__name__} {name_or_id!r}; expected a job id or name as a string "
            f"(e.g. ddpctl.job({str(name_or_id)!r}))"
        )
    from ddpctl.api.remote import RemoteJob
    from ddpctl.remote.jobs import find_recorded, recorded

    registry = Registry.from_env()
    if name_or_id is not None:
        from ddpctl.backends.names import resolve

        try:
            return Job(resolve(registry, name_or_id, warn=warn or _silent))
        except JobNotFound:  # not a job of here: one submitted to a remote cluster from here?
            found = find_recorded(name_or_id, recorded())
            if found is None:
                raise
            return RemoteJob(found.record, found.cluster)
    records = registry.records()
    remote = recorded()
    newest = max(remote, key=lambda row: row.record.submitted_at) if remote else None
    if newest is not None and (not records or newest.record.submitted_at > records[-1].submitted_at):
        return RemoteJob(newest.record, newest.cluster)
    if not records:
        raise JobNotFound(f"no jobs in the registry {registry.path} yet: submit one with `ddpctl submit`")
    return Job(records[-1])


def _silent(_text: str) -> None:
    """The API prints nothing: a notebook or a sweep decides what to show."""


def jobs() -> list[Job]:
    """Every job in the registry, oldest submission first (the jobs submitted to remote clusters: `list`)."""
    return [Job(record) for record in Registry.from_env().records()]
