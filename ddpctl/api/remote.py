"""The handle on a job submitted to a remote cluster (`ddpctl.submit(..., cluster=NAME)`, or `ddpctl.job(REF)`
of a job recorded under a cluster): every call runs the cluster's own ddpctl over the cluster's shared SSH
connection (ddpctl.remote): nothing of the run dir is read from here, its `run_dir` is a path on the cluster.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ddpctl.api.handle import Job, check_preempt_kind
from ddpctl.errors import DdpctlError, RemoteError
from ddpctl.logs.core import Source
from ddpctl.logs.failures import ErrorHit
from ddpctl.logs.stream import LogLine
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState

if TYPE_CHECKING:
    from ddpctl.api.outcome import SubmitOutcome
    from ddpctl.remote.profiles import Cluster
    from ddpctl.remote.send import Sent
    from ddpctl.spec.model import JobSpec


def version() -> str:
    """This ddpctl's version, which the cluster's must match. The package is always imported before its
    subpackages, and an import of it from here would go up the layers (tests/test_architecture.py)."""
    return str(sys.modules["ddpctl"].__version__)


def state_of(data: dict[str, Any]) -> JobState:
    """A JobState from the remote `status --json` object (its state fields; the rest is the run's report)."""
    code = data.get("exit_code")
    return JobState(
        state=str(data.get("state") or "UNKNOWN"),
        restarts=data["restarts"] if isinstance(data.get("restarts"), int) else 0,
        reason=str(data.get("reason") or ""),
        nodes=str(data.get("nodes") or ""),
        elapsed=str(data.get("elapsed") or ""),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
    )


class RemoteJob(Job):
    """A job on a remote cluster of clusters.yaml: status, wait, logs, cancel and preempt through its ddpctl."""

    def __init__(self, record: JobRecord, cluster: str) -> None:
        super().__init__(record, state_fn=lambda _record: self.status())
        self.cluster = cluster

    def __repr__(self) -> str:
        return f"RemoteJob({self.job_id!r}, name={self.name!r}, backend={self.backend!r}, cluster={self.cluster!r})"

    def _ask(self, words: Sequence[str], *, as_json: bool, timeout: float = 60.0) -> str:
        from ddpctl.remote.passthrough import run_remote

        return run_remote(self.cluster, [*words, "--", self.job_id], version(), as_json=as_json, timeout=timeout).out

    def status(self) -> JobState:
        """The state the cluster's ddpctl gives (`status --json` there); RemoteError: one line."""
        data = json.loads(self._ask(["status", "--json"], as_json=True))
        return state_of(data)

    def cancel(self) -> None:
        self._ask(["cancel"], as_json=False)

    def preempt(self, kind: str = "preemption") -> None:
        check_preempt_kind(kind)
        self._ask(["preempt", "--wait=0", f"--as={kind}"], as_json=False, timeout=180.0)

    def logs(
        self,
        *,
        follow: bool = False,
        rank: int | Sequence[int] | str | None = None,
        node: str | None = None,
        attempt: int | str | None = None,
        grep: str | None = None,
    ) -> Iterator[LogLine]:
        """The job's rank output from the cluster's `logs --json -t` (followed, reconnected as `logs -f
        --cluster` is), filtered there; the arguments mean what they mean for a local job. Lines are read by a
        thread of their own, at most 10,000 ahead of the caller; a caller that stops a follow early leaves it
        (and its ssh) until the job ends or this process exits. Reconnection notes go to stderr."""
        words = log_words(follow=follow, rank=rank, node=node, attempt=attempt, grep=grep, job_id=self.job_id)
        return _streamed(self.cluster, words)


def log_words(
    *,
    follow: bool,
    rank: int | Sequence[int] | str | None,
    node: str | None,
    attempt: int | str | None,
    grep: str | None,
    job_id: str,
) -> list[str]:
    """The cluster's `logs --json -t` for RemoteJob.logs; each value one word (a `-f` pattern stays a pattern)."""
    from ddpctl.remote.passthrough import option

    words = ["logs", "--json", "-t", *(["-f"] if follow else [])]
    ranks = ",".join(str(r) for r in ([rank] if isinstance(rank, (int, str)) else rank)) if rank is not None else None
    for flag, value in (("--rank", ranks), ("--node", node), ("--attempt", attempt), ("--grep", grep)):
        words += [option(flag, value)] if value is not None else []
    return [*words, "--", job_id]


class _QueueSink:
    """A logs sink (ddpctl.logs.output) that hands each line to the iterator reading the queue."""

    def __init__(self, lines: queue.Queue[object]) -> None:
        self.queue = lines

    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None:
        for text in lines:
            self.queue.put(LogLine(source.attempt, source.node, source.rank, text, when))

    def note(self, text: str) -> None:
        """The remote's notes go to stderr as they come (ddpctl.remote.follow)."""

    def failure(self, source: Source, hit: ErrorHit) -> None:
        """Not asked for: the remote command is `logs --json`, never `--errors`."""

    def flush(self) -> None:
        """Each line was handed on as it came."""


def _streamed(name: str, words: Sequence[str]) -> Iterator[LogLine]:
    from ddpctl.remote import follow
    from ddpctl.remote.profiles import clusters_path, find, read_clusters
    from ddpctl.remote.transport import Transport

    path = clusters_path()
    cluster = find(read_clusters(path), name, path)
    lines: queue.Queue[object] = queue.Queue(maxsize=10000)  # the reader's pace bounds what is held here
    end = object()

    def pump() -> None:
        try:
            follow.show(Transport(cluster), [*cluster.ddpctl, *words], _QueueSink(lines), version())
            lines.put(end)
        except DdpctlError as err:
            lines.put(err)

    threading.Thread(target=pump, daemon=True).start()
    while (item := lines.get()) is not end:
        if isinstance(item, DdpctlError):
            raise item
        assert isinstance(item, LogLine)
        yield item


def chosen(name: str | None, spec: JobSpec | None) -> Cluster:
    """The cluster `name` (`--cluster`, `cluster=`) names, else the spec's `cluster:`: an unknown name is one
    line (did you mean), naming the spec file when the spec chose it."""
    from ddpctl.errors import SpecError
    from ddpctl.remote.profiles import clusters_path, find, read_clusters

    path = clusters_path()
    if name:
        return find(read_clusters(path), name, path)
    assert spec is not None and spec.cluster is not None  # the caller chose the remote path for it
    try:
        return find(read_clusters(path), spec.cluster, path)
    except SpecError as err:
        raise SpecError(f"{spec.source}: cluster: {err}") from None


def submit_on(
    cluster: Cluster, spec: JobSpec, overrides: Sequence[str], *, tag: str, **extra: Any
) -> tuple[RemoteJob, Sent, SubmitOutcome]:
    """Send the spec's code (only what the cluster lacks) and submit it there (ddpctl.remote.send); the job is
    recorded here under its cluster. Returns its handle, what was sent and the outcome the cluster answered."""
    from ddpctl.remote import send
    from ddpctl.remote.transport import Transport

    code = send.local_code(spec)
    request = send.request_of(spec, code, cluster, overrides, **extra)
    sent, answered = send.submit_code(Transport(cluster), code, request, version(), tag)
    record, outcome = recorded(cluster.name, spec.source, answered)
    return RemoteJob(record, cluster.name), sent, outcome


def recorded(cluster: str, source: str, answered: object) -> tuple[JobRecord, SubmitOutcome]:
    """The submission's outcome as a record here (under the cluster), or its one-line error."""
    import time

    from ddpctl.api.outcome import outcome_from
    from ddpctl.remote.jobs import registry_of
    from ddpctl.sanitize import visible

    outcome = outcome_from(succeeded(cluster, answered), cluster)
    job_id, name = visible(outcome.job_id), visible(outcome.name)
    run_dir, backend = visible(outcome.run_dir), visible(outcome.backend)  # shown by list, status
    record = JobRecord(job_id, name, run_dir, backend, time.time(), str(source))
    registry_of(cluster).add(record)
    return record, outcome


def shown_here(outcome: SubmitOutcome, cluster: str) -> list[str]:
    """The lines `submit` prints of a job submitted on the cluster, as they read here (made visible, and each
    command they name with `--cluster`)."""
    from ddpctl.remote.passthrough import for_here
    from ddpctl.sanitize import visible

    return [for_here(visible(line), cluster) for line in outcome.lines()]


def succeeded(cluster: str, outcome: object) -> dict[str, Any]:
    """The cluster's outcome of a request (submit, dry-run, doctor) if it succeeded, else its one line, with
    the cluster's exit status."""
    from ddpctl.errors import SpecError
    from ddpctl.sanitize import visible

    if not isinstance(outcome, dict):
        raise RemoteError(f"cluster {cluster!r}: the cluster answered no outcome: {visible(str(outcome))[:80]}")
    if not outcome.get("ok"):
        err = SpecError(f"cluster {cluster!r}: {visible(str(outcome.get('error')))}")
        code = outcome.get("code")
        err.exit_code = code if isinstance(code, int) and 0 < code < 126 else 1
        raise err
    return outcome
