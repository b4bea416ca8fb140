"""What a job's attempt loop asks ddpctl: record the start, fan the stop signal out, decide about requeueing.

`scontrol requeue` itself stays in the shell: containers often lack scontrol inside, and the shell is the
one process Slurm guarantees to be around when the run ends.

The attempt loop's contract. Every driver of a job's attempts calls these functions, for attempt N
(`attempt_of`: SLURM_RESTART_COUNT, plus DDPCTL_CHAIN_ATTEMPT in a chained run):
1. run a step: `batch_start` records the attempt's start (and an unacknowledged stop of attempt N-1); one
   `ddpctl launch` per node runs the step (a preflight check first where wanted: ddpctl.node.nodecheck);
2. take the stop: the stop signal, wherever it lands, goes to `on_signal`: the `signal` event and its kind,
   every node's stop file, then the driver's `fan_out` (the signal to each node's launcher). The driver then
   waits for the step to end (the ranks agree on a step, checkpoint and leave);
3. decide: with the step's exit status, `decide_run`: the one decision (ddpctl.node.decide: the budgets, the
   blame), recorded as the `decision` event, with a blamed node excluded and a finish marked; it returns the
   action (requeue, finish, fail) and the job's exit status;
4. requeue or chain: only the driver acts on the action: attempt N+1 in this job again or in a chained
   successor job; anything else ends the job with the decision's exit status.

The three drivers are adapters to it (each keeps what only its world can do):
- the batch shell (templates/ddp.sbatch.j2, through `ddpctl internal ...`, ddpctl.cli.internal): 1. node 0's
  launcher records the start once its torchrun runs (`ddpctl.node.launch.record_attempt_start`; `decide_run`
  does where none did); 2. a trap runs `internal on-signal`, whose fan-out is `scancel --signal` to the step's
  tasks once every launcher armed (a chained run submits its successor there); 3. `internal decide RUN_DIR
  --exit RC` prints the action; 4. `scontrol requeue` (then `internal exclude` where a node was excluded), or
  `internal chain-next` (chain mode, or a refused requeue); a chained run that ends runs `internal chain-drop`.
- the local supervisor (ddpctl.backends.local.supervisor, `Supervisor.run`): 1. `batch_start` before it starts
  the simulated nodes; 2. its signal handler runs `on_signal`, fanned out to each launcher process, and it kills
  an attempt whose stop went unacknowledged past the lead time, as Slurm would; 3. `decide_run`; 4. its loop
  runs the next attempt (a fresh port, past the excluded nodes) or returns the exit status.
- submitit (ddpctl.backends.slurm.submitit, `Lead` on global task 0): 1. `Lead.run` calls `batch_start`;
  2. Slurm signals every task itself: a watcher thread sees the first stop file and runs `on_signal` with no
  fan-out; 3. `Lead.decide`, from submitit's `checkpoint()` after a stop or a failure, directly after a clean
  end; 4. `checkpoint()` returns a fresh DelayedSubmission (submitit runs `scontrol requeue`) or None.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from ddpctl import exitcodes, safeio
from ddpctl.errors import DdpctlError, WaitTimeout
from ddpctl.health.records import last_checkpoint, progress_records
from ddpctl.node import nogroup
from ddpctl.node.blame import blame, facts_of
from ddpctl.node.decide import Decision, Progress, RunOutcome, classify_signal, decide, root_exit
from ddpctl.node.site import node_site
from ddpctl.node.torchreport import last_error
from ddpctl.run import envvars, history, notify
from ddpctl.run.history import Attempt, AttemptStarted, Hung, Kind, RunHistory, Signalled, StopUnacknowledged
from ddpctl.run.layout import RunLayout
from ddpctl.run.markers import with_markers
from ddpctl.run.rundir import run_spec, wait_for_run_dir
from ddpctl.run.stoptruth import launchers_armed, read_listeners
from ddpctl.slurm.env import attempt_number
from ddpctl.spec import time_to_seconds

FanOut = Callable[[str], None]  # delivers the stop signal (by name) to every node's launcher
LAUNCHER_WAIT_S = 10.0  # at most, for the step's launchers to arm before the stop signal goes to them


def wait_for_launchers(
    layout: RunLayout, attempt: int, nodes: int, timeout_s: float = LAUNCHER_WAIT_S, poll_s: float = 0.1
) -> bool:
    """Whether every node's launcher of `attempt` armed its stop handler (it writes its node record after),
    waiting up to `timeout_s`. A signal that reaches a launcher while its interpreter still starts finds the
    default action, death (the step fails, and would be blamed on the script); one that arms later takes the
    stop from its stop file, written before the fan-out."""
    deadline = time.monotonic() + timeout_s
    while not launchers_armed(layout, attempt, nodes):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def attempt_of(env: Mapping[str, str]) -> int:
    return attempt_number(env)


# How far a batch shell's own clock reading may lie from this process's and still be taken as the start time.
AT_SLACK_S = 3600.0


def start_time(text: str, now: float) -> float | None:
    """The attempt's start as the batch shell read it (bash's `$EPOCHREALTIME`, whose decimal separator follows
    the locale), when it is a plausible time before `now`; None: use `now` (pure)."""
    try:
        at = float(text.strip().replace(",", "."))
    except ValueError:
        return None
    return at if now - AT_SLACK_S <= at <= now + 1.0 else None


def batch_start(layout: RunLayout, env: Mapping[str, str], at: str = "", past: RunHistory | None = None) -> None:
    """Record the attempt's start. `at` is when the batch shell started it: the record itself comes later (from
    node 0's launcher once its torchrun runs, templates/ddp.sbatch.j2), when nothing urgent needs the CPU.
    `past`: the run's history as the caller read it (read here when None)."""
    attempt = attempt_of(env)
    if not wait_for_run_dir(layout):
        raise WaitTimeout(f"no run directory {layout.root} (no job.yaml): its submit did not finish")
    layout.attempt_dir(attempt).mkdir(parents=True, exist_ok=True)
    if attempt > 0:
        record_unacknowledged(layout, attempt - 1, past if past is not None else history.load(layout.events))
    job_id = node_site(env).job_id(layout, env)  # the id the run's events name this attempt's job by
    started = start_time(at, time.time()) if at else None
    history.append(
        layout.events,
        AttemptStarted(
            t=round(started, 3) if started is not None else None,
            attempt=attempt,
            job_id=job_id,
            nodes=env.get("SLURM_JOB_NODELIST"),
            batch_host=env.get(envvars.BATCH_HOST) or socket.gethostname(),
            checkpoints_present=checkpoints_present(layout),
        ),
    )


def record_start_if_missing(layout: RunLayout, env: Mapping[str, str], past: RunHistory) -> None:
    """The batch shell's step ended: where no launcher recorded the attempt's start (node 0's never ran), record
    it now, dated by the shell (`envvars.ATTEMPT_AT`). Nothing for a shell that does not set that (a template of
    one's own, which runs `internal batch-start` itself)."""
    at = env.get(envvars.ATTEMPT_AT)
    if at is not None and not past.started(attempt_of(env)):
        batch_start(layout, env, at, past)


def checkpoints_present(layout: RunLayout) -> bool | None:
    """Whether the checkpoint directory holds anything as the attempt starts (None: cannot tell): an empty
    one means a restart from scratch, whatever the script does."""
    try:
        directory = layout.checkpoints(run_spec(layout).checkpoint.dir)
        with os.scandir(directory) as entries:
            return any(not e.name.startswith(".") for e in entries)
    except FileNotFoundError:
        return False
    except Exception:
        return None


def record_unacknowledged(layout: RunLayout, attempt: int, past: RunHistory) -> None:
    """The previous attempt was signalled but nobody stopped and nothing was recorded (Slurm killed the job,
    launchers included, before the lead time ran out): say so now, once."""
    past = with_markers(layout, attempt, past)  # its stop, if rank 0 wrote the marker and died before the event
    if past.unacknowledged_unrecorded(attempt) and past.attempt(attempt).first(history.Stopped) is None:
        history.append(
            layout.events,
            StopUnacknowledged(attempt=attempt, waited_s=None, listeners=read_listeners(layout, attempt), killed=True),
        )


# A rehearsal's signal arrives within a second of its request; an older request is stale and must not relabel
# a real signal (it is consumed either way).
REQUEST_MAX_AGE_S = 60.0


def request_kind(layout: RunLayout, kind: str) -> None:
    """Leave the kind `ddpctl preempt --as KIND` rehearses for the decision (`requested_kind` reads it)."""
    safeio.write_text_atomic(layout.preempt_request, json.dumps({"kind": kind, "t": time.time()}))


def requested_kind(layout: RunLayout, now: float | None = None) -> Kind | None:
    """`ddpctl preempt --as KIND` leaves the kind it rehearses here, just before it signals."""
    try:
        data = json.loads(safeio.read_text(layout.preempt_request))
        layout.preempt_request.unlink()
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("t"), (int, float)):
        return None
    if (now if now is not None else time.time()) - data["t"] > REQUEST_MAX_AGE_S:
        return None
    kind = data.get("kind")
    return kind if kind in ("timeout", "preemption") else None


def parse_time_left(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return time_to_seconds(text.strip())
    except Exception:
        return None


def on_signal(
    layout: RunLayout, env: Mapping[str, str], signal_name: str, time_left: Callable[[], int | None], fan_out: FanOut
) -> Signalled:
    spec = run_spec(layout)
    attempt = attempt_of(env)
    left = time_left()
    kind = requested_kind(layout) or classify_signal(left, spec.requeue.lead_s)
    event = history.append(layout.events, Signalled(attempt=attempt, signal=signal_name, kind=kind, time_left_s=left))
    # Two routes to every node: the stop files on the shared run dir, and the signal itself to each node's
    # launcher (which catches it; torchrun and the workers ignore it).
    for node_rank in range(spec.nodes):
        stop = layout.stop_file(attempt, node_rank)
        stop.parent.mkdir(parents=True, exist_ok=True)
        safeio.touch(stop)
    fan_out(signal_name)
    return event


def run_outcome(layout: RunLayout, past: RunHistory, attempt: int, exit_code: int) -> RunOutcome:
    """The outcome of `attempt` from the run's events alone (read once by the caller; markers: run.markers)."""
    this = past.attempt(attempt)
    code, stopped, hung = root_exit(exit_code, this.node_exits), this.first(history.Stopped) is not None, this.hung
    blamed = blame(replace(facts_of(this, code, stopped), launcher_error=batch_error(layout)))
    return RunOutcome(
        exit_code=code,
        stopped=stopped,
        signal_kind=this.signal_kind,
        infra_cause="node-lost" if this.first(history.NodeLost) is not None else "hang" if hung else None,
        blame=blamed,
        progress=progress_of(layout, past, attempt),
        attempt=attempt,
        reached=step_reached(layout, this, attempt),
        previous=past.attempt(attempt - 1).decision if attempt > 0 else None,
    )


def step_reached(layout: RunLayout, this: Attempt, attempt: int) -> int | None:
    """The step the attempt reached: where the hang watchdog found its first culprit, else the newest step its
    progress records show (None: no rank recorded a step: before the first, or a script without a heartbeat)."""
    hung = this.first(Hung)
    culprit = hung.culprits[0] if hung is not None and hung.culprits else {}
    step = culprit.get("step")
    if isinstance(step, int) and not isinstance(step, bool):
        return step
    steps = [r.get("step") for r in progress_records(layout, attempt).values()]
    known = [s for s in steps if isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63]
    return max(known) if known else None


def batch_error(layout: RunLayout) -> str:
    """The last error line of the batch output (read bounded, no link followed): see `blame.last_error`."""
    return last_error((safeio.read_bounded(layout.batch_log, 8192, tail=True) or b"").decode(errors="replace"))


def progress_of(layout: RunLayout, past: RunHistory, attempt: int) -> Progress | None:
    """What the attempt resumed from (its ddpctl.runtime resume event) and the newest complete checkpoint now;
    None where no resume was recorded (a script with checkpoints of its own: ddpctl cannot see its progress)."""
    resumed = past.attempt(attempt).resume
    if resumed is None:
        return None
    try:
        newest = last_checkpoint(layout.checkpoints(run_spec(layout).checkpoint.dir))
    except Exception:  # an unreadable job.yaml: the decision itself says so; no stall is claimed here
        return None
    before = past.attempt(attempt - 1).decision if attempt > 0 else None
    return Progress(resumed.step, newest[0] if newest else None, before.stalled or 0 if before is not None else 0)


def decide_run(layout: RunLayout, env: Mapping[str, str], exit_code: int, *, in_slurm_job: bool = False) -> Decision:
    """Decide the attempt's end and record it; the run's history is read once, before anything else.
    `in_slurm_job`: the caller ends the Slurm job right after, so its notice is waited for (ddpctl.run.notify)."""
    past = history.load(layout.events)
    record_start_if_missing(layout, env, past)
    spec = run_spec(layout)
    attempt = attempt_of(env)
    past = with_markers(layout, attempt, past)  # the one reader of the attempt's markers: from here, events alone
    outcome = run_outcome(layout, past, attempt, exit_code)
    decision = decide(outcome, spec.requeue, past.requeues_used(attempt))
    if decision.action == "finish" and decision.kind is None and (why := nogroup.warning(layout)) is not None:
        decision = replace(decision, reason=f"{decision.reason}; {why}")
    if decision.action == "finish":
        # Before the event: wherever a finish is recorded, the batch shell's restart guard sees this marker.
        safeio.touch(layout.finished_marker)
    decided = history.append(layout.events, decision.as_event(attempt, exit_code, outcome.stopped))
    wait_s = notify.SLURM_NOTICE_WAIT_S if in_slurm_job else 0.0  # never raises
    notify.on_event(layout, decided, RunHistory((*past.events, decided)), spec, wait_s)
    if decision.action == "requeue" and decision.kind in ("failure", "node_failure"):
        exclude_blamed(layout, env, RunHistory((*past.events, decided)), attempt)
    if decision.action == "finish" and spec.tracking:  # the tracker run created at submit ends with the run
        from ddpctl.run.tracking import close_run

        if (why := close_run(layout, "COMPLETED" if decision.exit_code == exitcodes.OK else "FAILED")) is not None:
            print(f"ddpctl: {why}", file=sys.stderr, flush=True)
    return decision


def exclude_blamed(layout: RunLayout, env: Mapping[str, str], past: RunHistory, attempt: int) -> None:
    """Never go back to a bad node (ddpctl.node.exclude); an exclusion that fails never changes the decision."""
    from ddpctl.node.excluding import after_failure

    try:
        after_failure(layout, env, past, attempt, run_spec(layout))
    except (OSError, DdpctlError) as err:
        print(f"ddpctl: no node excluded after attempt {attempt}: {err}", file=sys.stderr, flush=True)


def run_dir_arg(path: Path) -> RunLayout:
    return RunLayout(path.resolve())
