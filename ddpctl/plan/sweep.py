"""A sweep as one Slurm job array (pure: renders, runs no command).

The array's batch script is the spec's own template rendered once, with `--array=0-(n-1)[%N]` and each task's
run dir named `<run_dir>/<name>/<array job>_<task>/`: the task finds its point there, as that run dir's
job.yaml (the point's spec, which the launcher on every node reads as for any run). One script serves every
task, so a point may differ from the others only in what the nodes read from job.yaml: a key that the batch
script holds (nodes, time, partition, sbatch options, setup lines, requeue settings, the template, ...) cannot
vary within one sweep. `env` may: the batch shell exports the spec's own env (setup lines see that), and each
node's launcher gives its ranks the task's point's env over it.

With `requeue.mode: chain` (chosen by `auto` on a cluster where a job may not requeue itself) a task continues in
a successor job as a single run does (ddpctl.node.chain): a plain job, not an array task, on the task's run dir
(its argument). It runs the array's script without `--array`, written into each task's run dir as its
`job.sbatch` at submit, so the successor is that one task's and never a new array.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path

from ddpctl.errors import SpecError
from ddpctl.plan.render import RenderInputs, node_python, render_script, sbatch_options
from ddpctl.plan.requeue_mode import resolve_mode
from ddpctl.run.layout import ARRAY_OUTPUT, slurm_filename
from ddpctl.slurm.cluster import ClusterFacts
from ddpctl.spec import JobSpec
from ddpctl.spec.capabilities import QUEUE, SCRIPT
from ddpctl.spec.sweep import Point, array_range
from ddpctl.spec.sweepload import Sweep

TASK_RUN_ID = "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
PLACEHOLDER_ARRAY_JOB = "ARRAYJOB"


@dataclass(frozen=True)
class ArrayPlan:
    """What a sweep would submit: the points and their specs, the array's range and (sbatch) its one script."""

    sweep: Sweep
    array: str  # sbatch's --array value
    script: str | None  # the batch script every task runs; None for a backend that submits no script of ours
    successor: str | None = None  # requeue.mode chain: what a task's chained successor runs (no --array)

    @property
    def run_base(self) -> Path:
        return self.sweep.spec.run_base

    def text(self) -> str:
        """The dry run: the points, where each task runs, and the script."""
        spec, points = self.sweep.spec, self.sweep.points
        count = f"{len(points)} point{'s' * (len(points) != 1)}"
        lines = [
            f"sweep {spec.name}: {count}, one job array (--array={self.array}), backend {spec.backend}",
            f"run dirs: {self.run_base}/<array job>_<point>/ (e.g. {task_run_dir(self.run_base, 0)}),"
            " each with its point's job.yaml",
        ]
        width = len(str(len(points) - 1))
        lines += [f"  {point.index:>{width}}  {' '.join(point.overrides)}" for point, _ in points]
        if spec.capabilities.sweeps == QUEUE:
            at_once = self.sweep.axes.max_parallel or 1
            lines.append(
                f"backend local: one detached queue on this machine runs {at_once} at a time, each a local job"
            )
            return "\n".join(lines) + "\n"
        if self.script is None:
            lines.append(f"backend {spec.backend}: a sweep is planned as a Slurm job array of the sbatch backend only")
            return "\n".join(lines) + "\n"
        lines.append("--- batch script (every task runs this one) ---")
        return "\n".join(lines) + "\n" + self.script


def check_array_size(name: str, count: int, max_array_size: int | None) -> None:
    """Refuse, before sbatch, an array larger than the cluster allows: its indexes are 0..MaxArraySize-1
    (None: the cluster's value is unknown, sbatch decides)."""
    if max_array_size is not None and count > max_array_size:
        raise SpecError(
            f"sweep {name}: {count} points, but this cluster's MaxArraySize is {max_array_size} (array indexes "
            f"0-{max_array_size - 1}): at most {max_array_size} points in one sweep; use fewer values or split it"
        )


def with_requeue_mode(sweep: Sweep, facts: ClusterFacts) -> tuple[Sweep, str]:
    """The sweep with `requeue.mode: auto` decided for the cluster, as for a single job, and why (pure)."""
    spec, why = resolve_mode(sweep.spec, facts)
    mode = spec.requeue.mode
    points = tuple(
        (point, dataclasses.replace(mine, requeue=dataclasses.replace(mine.requeue, mode=mode)))
        for point, mine in sweep.points
    )
    return dataclasses.replace(sweep, spec=spec, points=points), why


def task_run_dir(run_base: Path, index: int, array_job: str = PLACEHOLDER_ARRAY_JOB) -> Path:
    return run_base / f"{array_job}_{index}"


def plan_sweep(sweep: Sweep) -> ArrayPlan:
    """The array plan; refuses a point whose spec would need another batch script than the first point's."""
    spec = sweep.spec
    array = array_range(len(sweep.points), sweep.axes.max_parallel)
    if spec.capabilities.submits != SCRIPT:
        return ArrayPlan(sweep, array, None)
    first_point, first = sweep.points[0]
    inputs = RenderInputs(run_base=first.run_base.resolve(), python=node_python(first))
    # The batch shell exports the spec's own env; the points' env values reach the ranks through job.yaml.
    reference = dataclasses.replace(first, env=spec.env, source=spec.source)
    script = array_script(reference, inputs, array)
    for point, point_spec in sweep.points[1:]:
        mine = dataclasses.replace(point_spec, env=spec.env, source=spec.source)
        if mine == reference:
            continue  # the same spec renders the same script: a sweep of env or args values renders once
        text = array_script(mine, inputs, array)
        if text != script:
            raise SpecError(_differs(point, first_point, script, text))
    chained = spec.requeue.enabled and spec.requeue.mode == "chain"
    return ArrayPlan(sweep, array, script, successor_script(reference, inputs) if chained else None)


def array_script(spec: JobSpec, inputs: RenderInputs, array: str) -> str:
    options = [
        ("output", str(Path(slurm_filename(inputs.run_base)) / ARRAY_OUTPUT)) if key == "output" else (key, value)
        for key, value in sbatch_options(spec, inputs.run_base)
    ]
    options.append(("array", array))
    return render_script(spec, inputs, {"sbatch_options": options, "run_id": TASK_RUN_ID})


def successor_script(spec: JobSpec, inputs: RenderInputs) -> str:
    """The array's script as one job (no --array): a single run's script. A chained task's successor gets its
    run dir as its argument, which replaces the job's own run id, and its output file on the command line
    (ddpctl.node.chain); a plain job has no SLURM_ARRAY_* variables for the array's run id (set -u)."""
    return render_script(spec, inputs)


def _differs(point: Point, first: Point, script: str, mine: str) -> str:
    """One line: which line of the script the point changes (the first changed line of each)."""
    ours, theirs = "", ""
    for line in difflib.unified_diff(script.splitlines(), mine.splitlines(), lineterm="", n=0):
        if line.startswith("-") and not line.startswith("---") and not ours:
            ours = line[1:].strip()
        elif line.startswith("+") and not line.startswith("+++") and not theirs:
            theirs = line[1:].strip()
    return (
        f"{point.label()}: its batch script has {theirs!r} where point {first.index}'s has {ours!r}; one job "
        "array runs one script, so a key the script holds (nodes, time, partition, sbatch, setup, requeue, ...) "
        "cannot vary within a sweep"
    )
