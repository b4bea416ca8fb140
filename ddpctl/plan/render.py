"""Render the batch script from a Jinja2 template (pure: text in, text out).

Every value that becomes a shell word goes through `shell_quote`, the one quoting function; values on
`#SBATCH` lines (parsed by sbatch itself, not by bash) go through `sbatch_value`.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from ddpctl import pyargv
from ddpctl.errors import SpecError
from ddpctl.plan.sandbox import make_sandbox, render_bounded
from ddpctl.plan.tplcache import template_cache
from ddpctl.record import Record
from ddpctl.run.layout import ENDED_MARKERS, EXCLUDED_NODES, NODE_LEFT, NODE_LOST, SPARE_RESTARTS, sbatch_output
from ddpctl.spec import JobSpec
from ddpctl.spec.sbatchkeys import SBATCH_KEYS
from ddpctl.spec.templates import template_path

# sbatch's own #SBATCH parser understands double quotes but no escapes, so a value needing quotes must not
# itself contain a double quote or a newline.
_SBATCH_PLAIN = re.compile(r"^[A-Za-z0-9._:,=@%/+\-\[\]]*$")


def shell_quote(value: object) -> str:
    return shlex.quote(str(value))


def sbatch_value(value: object) -> str:
    text = str(value)
    if _SBATCH_PLAIN.match(text):
        return text
    if '"' in text or "\n" in text or "\0" in text:
        raise SpecError(f"sbatch option value {text!r}: double quotes and newlines cannot be passed on an #SBATCH line")
    return f'"{text}"'


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class RenderInputs(Record):
    """What the template needs besides the spec: where runs go and how nodes call ddpctl."""

    run_base: Path  # absolute: <run_dir>/<name>; the job's run dir is <run_base>/<job id>
    python: str  # interpreter that runs `-m ddpctl` on the nodes


def sbatch_options(spec: JobSpec, run_base: Path) -> list[tuple[str, str | None]]:
    """The #SBATCH options in order; a None value is a flag without a value."""
    opts: list[tuple[str, str | None]] = [
        ("job-name", spec.name),
        ("nodes", str(spec.alloc_nodes)),
        ("ntasks-per-node", "1"),
    ]
    if spec.alloc_nodes > spec.nodes:
        opts.append(("no-kill", None))  # a failed node must not end the job: its spares take over (node.spare)
    opts += [(key.option, str(value)) for key in SBATCH_KEYS if (value := key.given(spec)) is not None]
    for key, value in spec.sbatch:
        if value is True:
            opts.append((key, None))
        elif value is not False:
            opts.append((key, str(value)))
    # chain: Slurm must never requeue the job itself; a successor job continues the run (ddpctl.node.chain).
    requeue = spec.requeue.enabled and spec.requeue.mode != "chain"
    opts.append(("requeue" if requeue else "no-requeue", None))
    # Append: a requeued job keeps its id and Slurm would otherwise truncate the output on each restart.
    opts += [("open-mode", "append"), ("output", sbatch_output(run_base))]
    if spec.requeue.enabled:
        # B: = the batch shell only; it fans the signal out to every node itself (see the template).
        opts.append(("signal", f"B:{spec.requeue.signal}@{spec.requeue.lead_s}"))
    return opts


def template_context(spec: JobSpec, inputs: RenderInputs) -> dict[str, Any]:
    launch, exports = '"${DDPCTL[@]}" launch', []
    if spec.container.enabled:
        from ddpctl.plan.container import container_command

        command = container_command(spec)
        launch, exports = command.shell(), list(command.exports)
    return {
        "launch": launch,  # the words after srun that start `ddpctl launch RUN_DIR` on each node
        "container_exports": exports,
        "spec": spec,
        "sbatch_options": sbatch_options(spec, inputs.run_base),
        "run_base": str(inputs.run_base),
        # The run dir's name under run_base, as a shell expression: the job id; an array task's is
        # <array job>_<task> (ddpctl.plan.sweep), the name `scontrol requeue` and squeue use for it.
        "run_id": "${SLURM_JOB_ID}",
        "python": inputs.python,  # kept for copied templates that still say `{{ python | q }} -m ddpctl`
        "ddpctl": pyargv.python_module(inputs.python, "ddpctl"),  # never imports from the job's working directory
        "setup": list(spec.setup),
        "env": list(spec.env),
        "stop_signal": spec.requeue.signal,
        "requeue_enabled": spec.requeue.enabled,
        "chain": spec.requeue.enabled and spec.requeue.mode == "chain",
        "ended_markers": list(ENDED_MARKERS),
        "excluded_marker": EXCLUDED_NODES,
        "node_lost_file": NODE_LOST,
        "lost_wait_s": LOST_WAIT_S,
        "node_left_prefix": NODE_LEFT,
        "spares": spec.alloc_nodes - spec.nodes,  # spare_nodes on a backend whose jobs hold them
        "spare_restarts_prefix": SPARE_RESTARTS,
    }


# How long the batch shell gives the surviving launchers at most to leave once a node is lost, before it ends a
# step that srun cannot end itself (a frozen or cut-off node's tasks). It goes on as soon as every node but one
# has left (their markers): they end their torchrun within a few seconds, more on a loaded node (a fixed 3 s
# wait killed a surviving launcher on a busy 2-core test cluster before it had recorded its exit).
LOST_WAIT_S = 10


def make_environment(search_dir: Path) -> jinja2.Environment:
    env = make_sandbox(search_dir)  # a template is untrusted input: see ddpctl.submit.sandbox
    env.filters["q"] = shell_quote
    env.filters["sbatch_value"] = sbatch_value
    env.bytecode_cache = template_cache()  # compiled code only, checked and content-keyed: see plan.tplcache
    return env


def render_for(spec: JobSpec) -> str:
    """The script `ddpctl submit` would submit: run dirs under the spec's run_dir, nodes use this Python."""
    return render_script(spec, RenderInputs(run_base=spec.run_base.resolve(), python=node_python(spec)))


def node_python(spec: JobSpec) -> str:
    """The interpreter the batch shell runs `-m ddpctl` with."""
    # With a container, `python` names the image's interpreter; the batch shell runs this host's ddpctl.
    return sys.executable if spec.container.enabled else spec.python or sys.executable


def render_script(spec: JobSpec, inputs: RenderInputs, extra: Mapping[str, Any] | None = None) -> str:
    path = template_path(spec.template)
    if path is None:
        raise SpecError(f"{spec.source}: template: {spec.template!r} not found")
    env = make_environment(path.parent)
    try:
        return render_bounded(env.get_template(path.name), {**template_context(spec, inputs), **(extra or {})})
    except jinja2.TemplateError as err:
        raise SpecError(f"template {path}: {' '.join(str(err).split())}") from err
    except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError, MemoryError) as err:
        # The template's own expression failed ({{ 1/0 }}, a bad index): its author's mistake, one line.
        raise SpecError(f"template {path}: {type(err).__name__}: {' '.join(str(err).split())}") from err
