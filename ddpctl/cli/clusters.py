"""`ddpctl clusters [--check]`: the cluster profiles of clusters.yaml (ddpctl.remote.profiles), one line each;
with --check, each cluster asked over SSH (all at once) for its ddpctl and Slurm versions: one line per cluster,
exit status 1 when any failed."""

from __future__ import annotations

import argparse
from typing import Any


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "clusters",
        help="list the remote cluster profiles (clusters.yaml); --check reaches each over SSH",
        description="List the clusters of ~/.config/ddpctl/clusters.yaml ($DDPCTL_CLUSTERS). With --check, "
        "connect to each with the system's ssh and report its ddpctl and Slurm versions.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="connect to each cluster: reachable, remote ddpctl version, Slurm version",
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these clusters (default: all)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl.remote import profiles
    from ddpctl.sanitize import visible

    path = profiles.clusters_path()
    clusters = profiles.read_clusters(path)
    chosen = [profiles.find(clusters, name, path) for name in args.names] or list(clusters.values())
    if not chosen:
        print(f"no clusters: write them in {visible(str(path))} (README: From your laptop)")
        return 0
    if not args.check:
        width = max(len(c.name) for c in chosen)
        for cluster in chosen:
            where = f"  workdir {cluster.workdir}" if cluster.workdir else ""
            print(visible(f"{cluster.name:<{width}}  {cluster.ssh}  {' '.join(cluster.ddpctl)}{where}"))
        return 0
    return check(chosen)


def check(chosen: list[Any]) -> int:
    from ddpctl import __version__
    from ddpctl.proc import concurrently
    from ddpctl.remote.check import check_cluster
    from ddpctl.remote.transport import Transport
    from ddpctl.sanitize import visible

    results = concurrently(*(lambda c=c: check_cluster(c, Transport(c), __version__) for c in chosen))
    width = max(len(r.name) for r in results)
    for result in results:
        head = f"{result.name:<{width}}  {visible(result.destination)}"
        if result.problem:
            print(f"{head}  FAILED  {result.problem}")
        else:
            where = f"  workdir {result.workdir}" if result.workdir else ""
            print(f"{head}  ok  ddpctl {result.ddpctl}  slurm {result.slurm}{where}  {result.seconds:.2f} s")
    return 1 if any(r.problem for r in results) else 0
