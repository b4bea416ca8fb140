"""Notifications (spec `notify:`): which recorded event is worth a message, and handing it to a sender.

Called right where an event is decided (`on_event`: the attempt's decision in ddpctl.node.batch, a hang in the
watchdog, a lost node in the launcher's peer watch). The sending happens in a detached process
(`python -m ddpctl.run.notifysend`, its own session, no pipes): a webhook that hangs or a mail host that is down
can neither delay nor break the job. One exception, bounded: a decision made inside a Slurm job (the batch
shell's `internal decide`, submitit's lead task) is the job's last act, and Slurm kills every process left in the
job's cgroup as soon as the job script exits, the detached sender with them (measured on the test cluster: the
finish notice never arrived). There the decision waits for its sender up to `SLURM_NOTICE_WAIT_S`; the training
is over by then, so it delays only the job's end (or its requeue), and a healthy channel answers in a second.
Nothing here raises: a notification is never worth a job.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ddpctl import proc
from ddpctl.run.history import Decided, Event, Hung, NodeLost, RunHistory, SlowedDown, WatchFound
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, RequeuePolicy

BUDGETS = {
    "preemption": "max_preemptions",
    "timeout": "max_timeouts",
    "failure": "max_failures",
    "node_failure": "max_node_failures",
}
SENDER = "ddpctl.run.notifysend"
# How long a decision inside a Slurm job waits for its sender (above): a healthy webhook, sendmail or command ends
# in a second or two; one that hangs for its whole timeout_s and retry would hold the requeue for 20 s or more,
# and that is not worth it: past this bound the notice may be lost with the job (the run's events still say it).
SLURM_NOTICE_WAIT_S = 15.0


def about(event: Event, past: RunHistory, policy: RequeuePolicy) -> str | None:
    """What `event` (already recorded in `past`) is worth telling (a spec.notify event name), or None."""
    if isinstance(event, SlowedDown):
        return "slowdown"
    if isinstance(event, Hung | NodeLost | WatchFound):
        return "hang" if isinstance(event, Hung) else "node-lost" if isinstance(event, NodeLost) else watched(event)
    if not isinstance(event, Decided):
        return None
    if event.action == "finish":
        return "finish" if event.exit_code == 0 else "failure"
    if event.kind is None:
        return None
    budget = getattr(policy, BUDGETS[event.kind])  # after this requeue, none of its kind is left
    return "last-requeue" if past.requeues_used(event.attempt + 1)[event.kind] >= budget else None


def watched(event: WatchFound) -> str | None:
    return event.kind if event.kind in ("vanished", "stalled") else None


def message(kind: str, event: Event, spec: JobSpec, layout: RunLayout) -> dict[str, Any]:
    """The notice: a one-line `text` for people (Slack, the mail's subject) and the fields for programs."""
    job = layout.root.name
    attempt = getattr(event, "attempt", None)
    head = f"ddpctl: {spec.name} (job {job})"
    if isinstance(event, Decided):
        why = f"{event.reason}" + (f" — {event.cause_why}" if event.cause_why else "")
        text = {
            "finish": f"{head} finished: {why}",
            "failure": f"{head} failed (exit {event.exit_code}): {why}",
            "last-requeue": f"{head} requeued for the last time on its {event.kind} budget: {why}",
        }[kind]
    elif isinstance(event, Hung):
        text = f"{head} hung in attempt {attempt}: no progress for {event.idle_s or 0:.0f} s ({event.allowance})"
    elif isinstance(event, SlowedDown):
        text = (
            f"{head} slowed down on node {event.node} in attempt {attempt}: {event.step_s} s/step, "
            f"{event.factor}x {event.versus}, for {event.sustained_s} s (the run goes on)"
        )
    elif isinstance(event, WatchFound):
        text = f"{head} {event.kind} (ddpctl watch): {event.why}"
    else:
        assert isinstance(event, NodeLost)
        text = f"{head} lost node {event.node or '?'} in attempt {attempt}: {event.why}"
    return {"event": kind, "text": text[:1000], "name": spec.name, "job": job, "attempt": attempt,
            "run_dir": str(layout.root), "t": event.t}  # fmt: skip


def on_event(
    layout: RunLayout,
    event: Event,
    past: RunHistory | None = None,
    spec: JobSpec | None = None,
    wait_s: float = 0.0,
) -> None:
    """Send what `event` is worth to the spec's channels, in the background; never raises. It waits for the
    sender only up to `wait_s` (0: not at all; SLURM_NOTICE_WAIT_S where the caller's process is about to end)."""
    try:
        if spec is None:
            from ddpctl.run.rundir import run_spec

            spec = run_spec(layout)
        if not spec.notify.channels:
            return
        kind = about(event, past if past is not None else RunHistory((event,)), spec.requeue)
        if kind is None or kind not in spec.notify.on:
            return
        sender = start(layout, message(kind, event, spec, layout))
        if wait_s > 0:
            proc.wait_bounded(sender, wait_s)
    except Exception as err:  # a notification is never worth a job: say so on stderr and go on
        print(f"ddpctl: notification not sent: {err}", file=sys.stderr, flush=True)


def start(layout: RunLayout, notice: dict[str, Any]) -> proc.Popen:
    """The detached sender (its own session, no pipes to the caller, stdin/stdout/stderr to /dev/null)."""
    with open(os.devnull, "wb") as null:  # noqa: PTH123 - a plain sink for the child's output
        return proc.spawn(
            [sys.executable, "-m", SENDER, str(layout.root), json.dumps(notice)],
            stdin=proc.DEVNULL,
            stdout=null,
            stderr=null,
            new_session=True,
        )
