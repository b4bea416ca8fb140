"""The jobs this machine submitted to remote clusters: their records (`<ddpctl home>/clusters/NAME/registry.jsonl`,
written by `submit --cluster`), found by id or name, and their states as each cluster's own ddpctl tells them.

A cluster's states are one remote `ddpctl list --json` over its shared connection, whatever the number of its
jobs; the clusters are asked side by side, so one that cannot be reached costs ssh's connect bound once, not
once per cluster. Its failure is one line (a `RemoteError` naming the cluster and its destination), kept apart
from the other clusters' answers so that they (and the local jobs) still list.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ddpctl.errors import RemoteError
from ddpctl.proc import Completed, Runner
from ddpctl.remote.passthrough import answer
from ddpctl.remote.profiles import Cluster
from ddpctl.remote.transport import Transport
from ddpctl.run.registry import JobRecord, Registry, registry_home
from ddpctl.sanitize import visible
from ddpctl.spec.fields import CLUSTER_RE

MAX_LISTING = 16 << 20  # a remote registry's `list --json`: ~300 bytes a job
MAX_CLUSTERS = 256  # as many as clusters.yaml may name


@dataclass(frozen=True)
class RemoteRecord:
    cluster: str
    record: JobRecord
    ref: str = ""  # how the cluster's ddpctl is asked about it: a sweep's array job id, else the job id

    @property
    def job_ref(self) -> str:
        return self.ref or self.record.job_id


def clusters_home(env: Mapping[str, str] | None = None) -> Path:
    return registry_home(os.environ if env is None else env) / "clusters"


def registry_of(cluster: str, env: Mapping[str, str] | None = None) -> Registry:
    return Registry(clusters_home(env) / cluster)


def recorded(env: Mapping[str, str] | None = None) -> list[RemoteRecord]:
    """Every remote job recorded here, cluster by cluster (names sorted), each cluster's oldest first."""
    try:
        names = sorted(entry.name for entry in os.scandir(clusters_home(env)) if re.fullmatch(CLUSTER_RE, entry.name))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for name in names[:MAX_CLUSTERS]:
        if (clusters_home(env) / name / "registry.jsonl").is_file():
            out += [RemoteRecord(name, record) for record in registry_of(name, env).records()]
    return out


def find_recorded(ref: str, records: Iterable[RemoteRecord]) -> RemoteRecord | None:
    """The remote job `ref` names: its job id (on any cluster), else a sweep's array job id, else the newest
    submission of that name, else `<sweep>_<task>` of a remote sweep (pure). A sweep (by array job id, or a
    name whose newest submission is a sweep) is its newest task with `ref` its array job id: the cluster's
    ddpctl answers for the whole sweep, as it does here. `CLUSTER:REF` is REF among that cluster's jobs only
    (what `list` shows for a remote job whose id a local job or another cluster's also has)."""
    rows = list(records)
    cluster, colon, rest = ref.partition(":")
    if colon and re.fullmatch(CLUSTER_RE, cluster):
        return find_recorded(rest, [row for row in rows if row.cluster == cluster])
    by_id = [row for row in rows if row.record.job_id == ref]
    if by_id:
        return newest(by_id)
    by_sweep = [row for row in rows if row.record.sweep == ref]
    by_name = [row for row in rows if row.record.name == ref]
    found = newest(by_sweep or by_name)
    if found is not None:
        sweep = found.record.sweep
        return RemoteRecord(found.cluster, found.record, sweep) if sweep is not None else found
    base, _, index = ref.rpartition("_")
    parent = find_recorded(base, rows) if base and index.isdigit() else None
    if parent is None or parent.record.sweep is None:
        return None
    task = f"{parent.record.sweep}_{int(index)}"
    return newest([row for row in rows if row.cluster == parent.cluster and row.record.job_id == task])


def newest(rows: list[RemoteRecord]) -> RemoteRecord | None:
    return max(rows, key=lambda row: row.record.submitted_at) if rows else None


def parse_states(text: str) -> dict[str, str]:
    """{job id: state} from the lines of a remote `list --json`; a line that is not a job's object is skipped
    (the cluster's own registry may hold a damaged line: its ddpctl warns about it, on its stderr)."""
    states: dict[str, str] = {}
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("job_id"), str) and isinstance(data.get("state"), str):
            states[data["job_id"]] = visible(data["state"])[:40]
    return states


def states_of(
    cluster: Cluster, local: str, *, runner: Runner | None = None, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The state of every job in the cluster's registry, from one remote `list --json`; RemoteError: one line."""
    done: Completed = Transport(cluster, runner=runner, env=env).run([*cluster.ddpctl, "list", "--json"])
    if len(done.stdout) > MAX_LISTING:
        raise RemoteError(f"cluster {cluster.name!r}: its `list --json` printed more than {MAX_LISTING} bytes")
    if done.returncode != 0:
        answer(cluster, done, local, as_json=False)  # raises the one line (no ddpctl there, its error)
    return parse_states(done.stdout)


@dataclass(frozen=True)
class Listing:
    states: dict[str, dict[str, str]]  # per cluster that answered: {job id: state}
    failures: list[str]  # one line per cluster that did not


Ask = Callable[[Cluster], dict[str, str]]


def ask_all(names: Iterable[str], profiles: Mapping[str, Cluster], ask: Ask, source: Path) -> Listing:
    """Each named cluster's states, asked side by side; a cluster that failed, or that is no longer a profile,
    is one line in `failures` and the others still answer."""
    import functools

    from ddpctl.proc import in_background

    wanted = sorted(set(names))
    pending = {name: in_background(functools.partial(ask, profiles[name])) for name in wanted if name in profiles}
    states: dict[str, dict[str, str]] = {}
    failures = []
    for name in wanted:
        if name not in pending:
            failures.append(f"cluster {name!r}: not in {source} any more: its jobs are listed without a state")
            continue
        try:
            states[name] = pending[name].result()
        except RemoteError as err:
            failures.append(f"{err}: its jobs are listed without a state")
    return Listing(states, failures)
