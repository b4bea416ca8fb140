"""`list`'s remote half: the jobs submitted here to remote clusters (ddpctl.remote.jobs), each with its state as
its cluster's ddpctl tells it, one remote `list --json` per cluster; a cluster that cannot answer is one line
on stderr and its jobs are listed without a state."""

from __future__ import annotations

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
