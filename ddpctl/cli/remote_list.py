"""`list`'s remote half: the jobs submitted here to remote clusters (ddpctl.remote.jobs), each with its state as
its cluster's ddpctl tells it, one remote `list --json` per cluster; a cluster that cannot answer is one line
on stderr and its jobs are listed without a state."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ddpctl.cli.common import note

NO_STATE = "-"  # the cluster did not answer (or --no-state)
UNKNOWN = "UNKNOWN"  # the cluster answered, but its registry no longer holds the job (pruned there)


def remote_rows(with_state: bool) -> list[tuple[str, Any, str | None]]:
    """(cluster, record, state) per remote job recorded here, oldest first within each cluster."""
    from ddpctl.remote.jobs import recorded

    rows = recorded()
    if not rows or not with_state:
        return [(row.cluster, row.record, None) for row in rows]
    states = asked({row.cluster for row in rows})
    out: list[tuple[str, Any, str | None]] = []
    for row in rows:
        known = states.get(row.cluster)
        out.append((row.cluster, row.record, None if known is None else known.get(row.record.job_id, UNKNOWN)))
    return out


def asked(names: set[str]) -> dict[str, dict[str, str]]:
    from ddpctl import __version__
    from ddpctl.errors import SpecError
    from ddpctl.remote.jobs import ask_all, states_of
    from ddpctl.remote.profiles import clusters_path, read_clusters

    path = clusters_path()
    try:
        profiles = read_clusters(path)
    except SpecError as err:  # the remote jobs cannot be asked: the local ones still list
        note(f"ddpctl: warning: {err}: remote jobs are listed without a state")
        return {}
    listing = ask_all(names, profiles, lambda cluster: states_of(cluster, __version__), path)
    for line in listing.failures:
        note(f"ddpctl: warning: {line}")
    return listing.states


def remote_lines(
    rows: list[tuple[str, Any, str | None]], *, each_task: bool, under: bool, taken: Collection[str] = ()
) -> list[tuple[str | None, Any, str, str | None]]:
    """(cluster, record, the id shown, its state) per line, as `list_rows` shows local jobs: a remote sweep
    once, as its array job with its tasks counted (states as the cluster said them; none asked: only the
    count), its tasks under it (`under`) or each task as a job (`each_task`, --json) (pure). Ids are shown
    as `qualified` says."""
    from ddpctl.run.sweeps import count_line, group

    shown = qualified(rows, taken)
    out: list[tuple[str | None, Any, str, str | None]] = []
    for cluster in dict.fromkeys(row[0] for row in rows):
        mine = [row for row in rows if row[0] == cluster]
        state_of = {id(record): state for _, record, state in mine}
        for record, tasks in group([record for _, record, _ in mine]):
            if not tasks or each_task:
                out += [(cluster, job, shown(cluster, job), state_of[id(job)]) for job in tasks or [record]]
                continue
            states = [state_of[id(task)] for task in tasks]
            known = [state for state in states if state is not None]
            line = count_line(known) if len(known) == len(states) else f"{len(tasks)} tasks"
            out.append((cluster, record, f"{shown(cluster, record, record.sweep)} (sweep)", line))
            if under:
                out += [(cluster, task, f"  {shown(cluster, task)}", state_of[id(task)]) for task in tasks]
    return out


def qualified(rows: list[tuple[str, Any, str | None]], taken: Collection[str]) -> Callable[..., str]:
    """shown(cluster, record, ref=its job id): `ref`, or `CLUSTER:ref` where a local job (`taken`: the local
    ids, sweeps and names) or another cluster's job has it too, or its sweep is shown so: the reference that
    names this one job (ddpctl.remote.jobs.find_recorded), where the bare id would name the laptop's own."""
    clusters_of: dict[str, set[str]] = {}
    for cluster, record, _ in rows:
        for ref in filter(None, (record.job_id, record.sweep)):
            clusters_of.setdefault(ref, set()).add(cluster)

    def clash(ref: str | None) -> bool:
        return ref is not None and (ref in taken or len(clusters_of.get(ref, ())) > 1)

    def shown(cluster: str, record: Any, ref: str | None = None) -> str:
        ref = ref or record.job_id
        return f"{cluster}:{ref}" if clash(ref) or clash(record.sweep) else ref

    return shown
