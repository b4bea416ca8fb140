"""The cluster's half of `sweep --cluster` (ddpctl.cli.remote_sweep), called by ddpctl.cli.remote_internal for a
request with the sweep's axes: the laptop's sweep read from its place in the code tree built here (the cluster's
defaults under it) and submitted here, or (`sweep --dry-run --cluster`) rendered here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpctl.spec.sweepload import Sweep


def sweep_job(request: dict[str, Any]) -> dict[str, Any]:
    """The cluster's half: the laptop's sweep submitted here, its tasks and the lines `ddpctl sweep` says of it."""
    from ddpctl.cli.sweep import announcement, submitted

    loaded = sweep_of(request)
    done = submitted(loaded)
    keys = ("job_id", "name", "run_dir", "backend", "sweep", "point")
    tasks = [{key: getattr(job.record, key) for key in keys} for job in done.jobs]
    return {"sweep": done.array_job, "name": done.name, "tasks": tasks, "lines": announcement(loaded, done)}


def sweep_preview(request: dict[str, Any]) -> int:
    """The cluster's half of `sweep --dry-run --cluster`: the points and the batch script, printed here."""
    import sys

    from ddpctl.cli.sweep import check_backend
    from ddpctl.plan.sweep import plan_sweep

    loaded = sweep_of(request)
    check_backend(loaded)  # refused as the sweep there would be (a job array's plan would be no answer)
    sys.stdout.write(plan_sweep(loaded).text())
    return 0


def sweep_of(request: dict[str, Any]) -> Sweep:
    from pathlib import Path

    from ddpctl.remote.receive import items_of, remote_sweep, store_of
    from ddpctl.remote.trees import tree_of

    code = tree_of(store_of(), items_of(request["tree"]))
    return remote_sweep(code, request, [str(word) for word in request.get("overrides", [])], cwd=Path.cwd())
