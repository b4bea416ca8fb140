"""A node's preflight check before torchrun (spec `health.preflight`): whether it runs, running it, its record.

`wanted` decides (pure): every attempt with `preflight: true`, never with `false`, and with `auto` (the default)
on the attempt after one that an infrastructure failure ended (a lost node, a hang, a rank killed by a signal, a
failed check): a node came back or another took its place, and a bad one should be found before training rather
than by it. Never on a run's first start under `auto`, whose first step it would delay.

`choose` refines `auto` where the previous attempt's fault left with its node: when that attempt blamed a node
(its decision's `cause_node`) and the blamed node is not among this attempt's nodes (a spare took its place,
or a successor job excludes it), the nodes that trained in the previous attempt (or passed its check) proved
themselves seconds ago and skip the check; a new node checks itself beside torchrun rather than before it (the
local checks, run once by the launcher's recheck thread, ddpctl.node.recheck: a failure there ends the attempt
and blames that node). The resumed attempt's start no longer waits for a check of every node (issue target:
spares resumed in 45-60 s). A blamed node back in the attempt, no node blamed, or a site `node_check` that has
not passed on any node of the run yet (alone on the new node, a command broken everywhere would blame it) keeps
the check before torchrun on every node, network stages included.

`run_check` is the edge: it runs `ddpctl.node.checkprog` in the workers' interpreter with torchrun's environment
(its output appended to the node's log), bounded by the spec's `preflight_timeout_s` plus an allowance for the
interpreter's start and torch's import, and records the `preflight` event the decision blames a node with
(`ddpctl.node.blame.preflight_blame`). A node that did not pass never starts torchrun.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from ddpctl import exitcodes, proc, pyargv, safeio
from ddpctl.node.torchrun import NodePlan
from ddpctl.run import history
from ddpctl.run.history import INFRASTRUCTURE_CAUSES, Launched, NodeChecked, NodeExited
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec

START_ALLOWANCE_S = 120  # the check's interpreter start and `import torch` (a cold shared filesystem is slow)
POLL_S = 0.1
WHY_MAX = 300
OUTPUT_LINES, LINE_MAX = 5, 200  # the node check's last lines kept in the event (checkprog keeps as many)


class Relay(Protocol):
    """What the check needs of the launcher's signal relay (`ddpctl.node.launch.Relay`)."""

    child: proc.Popen | None

    def ignore_stop_in_child(self) -> None: ...


STAGES = ("", "site", "hardware", "python", "gpu", "reach", "join", "allreduce", "timeout", "killed", "start")


def wanted(setting: bool | None, previous_cause: str | None) -> bool:
    """Whether this attempt's nodes check themselves (module docstring); `setting` None is `auto`."""
    if setting is not None:
        return setting
    return previous_cause in INFRASTRUCTURE_CAUSES


How = Literal["skip", "before", "beside"]  # no check; the full check before torchrun; the local one beside it


@dataclass(frozen=True)
class Choice:
    how: How
    why: str = ""  # said in the node's log when the check is skipped or moved beside torchrun


@dataclass(frozen=True)
class Previous:
    """What this node's choice needs of the attempt before: its decision's cause and blamed node, and the nodes
    that trained in it or passed its check."""

    cause: str | None = None
    blamed: str | None = None
    proven: frozenset[str] = frozenset()
    site_passed: bool = False  # the site's node_check passed on some node in some attempt of the run


def choose(
    setting: bool | None, previous: Previous, node: str, nodes: Sequence[str], site_check: bool = False
) -> Choice:
    """This node's check in this attempt (module docstring): `nodes` are the attempt's nodes; `site_check`: the
    spec has a `health.node_check`. A site command that never passed in this run is checked on every node before
    torchrun: run on one new node alone, a command broken everywhere would blame that node (and spend the
    node-failure budget) where the check on every node blames none."""
    if not wanted(setting, previous.cause):
        return Choice("skip")
    untried = site_check and not previous.site_passed
    replaced = setting is None and not untried and previous.blamed is not None and previous.blamed not in nodes
    if not replaced or not previous.proven & set(nodes):
        return Choice("before")
    if node in previous.proven:
        return Choice("skip", f"skipped: this node trained in the previous attempt, which {previous.blamed} ended")
    return Choice("beside", f"beside torchrun: a new node in place of {previous.blamed}")


def previous_of(layout: RunLayout, attempt: int) -> Previous:
    """The attempt before `attempt`, from the run's events; empty for a run's first attempt."""
    if attempt == 0:
        return Previous()
    past = history.load(layout.events)
    before = past.attempt(attempt - 1)
    decision = before.decision
    if decision is None:
        return Previous()
    nodes = {e.node for e in before.all(Launched)} | {e.node for e in before.all(NodeChecked) if e.ok}
    blamed = decision.cause_node
    site_passed = any(e.ok for e in past.all(NodeChecked))  # a passed preflight ran the site's command too
    return Previous(decision.cause, blamed, frozenset(nodes - {blamed}) if blamed else frozenset(), site_passed)


def check_argv(python: str, spec: JobSpec, dist: DistEnv, layout: RunLayout) -> list[str]:
    attempt = dist.restart_count
    return [
        *pyargv.python_module(python, "ddpctl.node.checkprog"),
        f"--result={layout.check_result(attempt, dist.node_rank)}",
        f"--store-file={layout.check_store(attempt)}",
        f"--master-addr={dist.master_addr}",
        f"--node-rank={dist.node_rank}",
        f"--nnodes={dist.nnodes}",
        f"--gpus={spec.gpus_per_node}",
        f"--timeout={spec.health.preflight_timeout_s}",
        *[f"--disk={path}" for path in (layout.root, layout.checkpoints(spec.checkpoint.dir))],
        *node_check_args(spec),
    ]


def node_check_args(spec: JobSpec) -> list[str]:
    command = spec.health.node_check
    return [f"--node-check={command}", f"--node-check-timeout={spec.health.node_check_timeout_s}"] if command else []


def bound_s(spec: JobSpec) -> float:
    """How long the launcher lets the check run: its own node check, the interpreter's start, the network stages
    (which wait up to one more node check's bound for a slower node)."""
    site = spec.health.node_check_timeout_s if spec.health.node_check else 0
    return START_ALLOWANCE_S + spec.health.preflight_timeout_s + 2 * site


def checked(dist: DistEnv, record: Mapping[str, Any] | None, status: int | None, seconds: float) -> NodeChecked:
    """The `preflight` event from the check's result file (untrusted: only well-typed fields count) and how it
    ended: `status` None when the launcher killed it at its bound, negative when a signal ended it. Only a final
    result (it has `seconds`) of a check that exited as it says counts as its verdict."""
    got = dict(record or {})

    def typed(key: str, kind: type) -> Any:
        value = got.get(key)
        return value if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)) else None

    ok, stage, why = typed("ok", bool), typed("stage", str) or "", typed("why", str) or ""
    output = typed("output", list) or []
    peers_ok = typed("peers_ok", bool)
    final = ok is not None and "seconds" in got and (status == 0) == (ok and peers_ok is not False)
    if status is None:
        ok, stage, why = False, "timeout", f"the check outlived its bound ({seconds:.0f} s) and was killed"
    elif status < 0:
        ok, stage, why = False, "killed", f"the check was ended by {proc_signal(-status)}"
    elif not final:
        ok, stage, why = False, "start", f"the check exited {status} without a result (the node's log says why)"
    return NodeChecked(
        attempt=dist.restart_count,
        node=dist.node_name,
        node_rank=dist.node_rank,
        ok=bool(ok),
        stage=stage if stage in STAGES else "start",
        why=why[:WHY_MAX],
        reached=typed("reached", bool),
        peers_ok=peers_ok if final else None,
        seconds=round(seconds, 2),
        output=tuple(line[:LINE_MAX] for line in output[:OUTPUT_LINES] if isinstance(line, str)),
    )


def proc_signal(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def wait_bounded(child: proc.Popen, bound_s: float) -> int | None:
    """The check's exit status; None when it outlived `bound_s` (then it is killed and reaped)."""
    deadline = time.monotonic() + bound_s
    while (code := child.poll()) is None:
        if time.monotonic() >= deadline:
            child.kill()
            child.wait()
            return None
        time.sleep(POLL_S)
    return code


def run_check(
    spec: JobSpec, dist: DistEnv, layout: RunLayout, plan: NodePlan, *, env: Mapping[str, str], relay: Relay
) -> NodeChecked:
    """Run this node's check (module docstring), record its `preflight` event and say it in the node's log."""
    argv = check_argv(plan.argv[0], spec, dist, layout)  # torchrun's interpreter: the workers'
    started = time.monotonic()
    log_path = layout.node_log(dist.restart_count, dist.node_rank)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with safeio.open_append_file(log_path) as log:
            child = proc.spawn(
                argv,
                env={**env, **plan.env_dict()},
                stdout=log,
                stderr=proc.STDOUT,
                preexec_fn=relay.ignore_stop_in_child,
            )
    except OSError as err:  # the interpreter is missing or cannot run: this node cannot train either
        event = replace(checked(dist, None, 1, 0.0), why=f"cannot run {argv[0]}: {safeio.describe(err)}"[:WHY_MAX])
    else:
        relay.child = child  # Slurm's TERM (the job ends) reaches the check as it would torchrun
        status = wait_bounded(child, bound_s(spec))
        relay.child = None
        record = safeio.read_json(layout.check_result(dist.restart_count, dist.node_rank))
        event = checked(dist, record, status, time.monotonic() - started)
    history.append(layout.events, event)
    verdict = "passed" if event.passed else f"failed ({event.stage or 'another node'}: {event.why})"
    print(f"ddpctl launch [{dist.node_name}]: preflight check {verdict} in {event.seconds} s", flush=True)
    return event


def fit(
    spec: JobSpec, dist: DistEnv, layout: RunLayout, plan: NodePlan, *, env: Mapping[str, str], relay: Relay
) -> Choice | None:
    """The node's check before torchrun, where this attempt wants one: None when the node failed it (it must not
    train); otherwise the choice, whose `beside` asks the launcher to check the node beside torchrun."""
    previous = previous_of(layout, dist.restart_count)
    choice = choose(spec.health.preflight, previous, dist.node_name, dist.hosts, bool(spec.health.node_check))
    if choice.why:
        print(f"ddpctl launch [{dist.node_name}]: preflight check {choice.why}", flush=True)
    if choice.how != "before":
        return choice
    return choice if run_check(spec, dist, layout, plan, env=env, relay=relay).passed else None


def leave(layout: RunLayout, dist: DistEnv) -> int:
    """A node that failed its check (or learnt that another did) records its exit without starting torchrun."""
    history.append(layout.events, NodeExited(node=dist.node_name, attempt=dist.restart_count, exit=exitcodes.FAILURE))
    print(f"ddpctl launch [{dist.node_name}]: torchrun not started; launch exits {exitcodes.FAILURE}", flush=True)
    return exitcodes.FAILURE
