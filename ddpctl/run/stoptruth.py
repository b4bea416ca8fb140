"""What became of each stop request, and of each restart: the truth `status`, `preempt` and `logs --errors` tell.

A stop request (the warning/preemption signal, or `ddpctl preempt`) helps only if some rank acts on it. Ranks
announce that they listen (`attempt-<n>/listen-rank-<r>.json`: `ddpctl.runtime.StopAgreement`, or a script's own
handler for `requeue.script_signal`); a stop is acknowledged once its `stop` event is recorded (each writer of
`stopped.json`, the agreed stop or the script's own clean exit after the request, appends it right after the
marker; ddpctl.run.markers appends it for a writer that died between the two). A request that nobody
acknowledged within the lead time means the script kept training until Slurm killed it: everything since the
script's own last checkpoint is lost.

Read-only over the run directory; the interpretation (`reports`, `restart_notes`) is pure over what was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ddpctl import safeio
from ddpctl.run import history
from ddpctl.run.history import (
    AttemptStarted,
    CheckpointRotated,
    Hung,
    Resumed,
    ResumePoint,
    RunHistory,
    ScratchRestart,
    Signalled,
    StopKilled,
    Stopped,
)
from ddpctl.run.layout import ATTEMPT_GLOB, LISTEN_GLOB, RunLayout, attempts_in

AckState = Literal["acknowledged", "waiting", "unacknowledged", "after_failure"]
MAX_LISTENERS_READ = 64  # enough to say who listens; bounded for a job with thousands of ranks
HOW_TO = (
    "to stop cleanly: use ddpctl.runtime.StopAgreement, or set requeue.script_signal and save + exit 0 "
    'in your handler, or poll $DDPCTL_STOP_FILE (README: "Scripts with their own checkpoints")'
)


@dataclass(frozen=True)
class AttemptFacts:
    """What the run directory says about one attempt."""

    attempt: int
    signal: Signalled | None = None  # the attempt's first stop request
    stopped: Mapping[str, Any] | None = None  # the `stop` event (stopped.json's record, which its writer appends)
    listeners: tuple[str, ...] = ()  # how each announcing rank listens ("rank 0: ...")
    resume: Resumed | None = None  # the runtime's report of what it resumed from
    start: AttemptStarted | None = None
    ended: bool = False  # a decision, a cancellation or a later attempt was recorded
    failed: Hung | None = None  # the first event saying the attempt had failed (a hang)
    killed: StopKilled | None = None  # the local backend's kill after the lead time (what it cost)
    point: ResumePoint | None = None  # a script's own checkpoints: what it could resume from, what it was told
    scratch: ScratchRestart | None = None  # ... and proof that it trained from scratch all the same
    rotated: CheckpointRotated | None = None  # ... and that its rotation deleted an earlier attempt's newer one


@dataclass(frozen=True)
class StopReport:
    attempt: int
    kind: str
    state: AckState
    text: str
    listeners: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "kind": self.kind,
            "state": self.state,
            "text": self.text,
            "listeners": list(self.listeners),
        }


MTIME_SLACK_S = 0.02


def report(facts: AttemptFacts, lead_s: int, now: float) -> StopReport | None:
    """The stop of one attempt, if one was requested (pure)."""
    if facts.signal is None:
        return None
    kind = facts.signal.kind or "stop"
    asked = facts.signal.t or 0.0
    head = f"attempt {facts.attempt}: {kind} stop"
    if facts.stopped is not None:
        return StopReport(
            facts.attempt, kind, "acknowledged", f"{head} acknowledged: {stopped_text(facts.stopped)}", facts.listeners
        )
    if (late := after_failure(facts, asked)) is not None:
        return StopReport(facts.attempt, kind, "after_failure", f"{head} {late}", facts.listeners)
    if not facts.ended and now - asked < lead_s:
        wait = f"requested {now - asked:.0f} s ago, waiting for the ranks (lead time {lead_s} s)"
        unheard = "; so far no rank has announced that it listens for stops" if not facts.listeners else ""
        return StopReport(facts.attempt, kind, "waiting", f"{head} {wait}{unheard}", facts.listeners)
    who = (
        "no rank listens for stops (the script does not handle them)"
        if not facts.listeners
        else f"{len(facts.listeners)} rank(s) listen but none stopped in time"
    )
    outcome = (
        "The script kept training until it ended or was killed: work since its own last checkpoint is lost"
        if facts.killed is None
        else f"The local backend killed it after the lead time, as Slurm would: {facts.killed.lost}"
    )
    text = f"{head} NOT ACKNOWLEDGED by any rank (lead time {lead_s} s): {who}. {outcome}; {HOW_TO}"
    return StopReport(facts.attempt, kind, "unacknowledged", text, facts.listeners)


def after_failure(facts: AttemptFacts, asked: float) -> str | None:
    """What to say of a stop that arrived after the attempt had already failed (None: it had not)."""
    failed_at = facts.failed.t if facts.failed is not None else None
    if failed_at is None or failed_at > asked:
        return None
    return (
        f"arrived {asked - failed_at:.0f} s after the attempt had already failed (hang recorded): nothing was"
        " training any more, so the stop had nothing to save and lost nothing"
    )


def stopped_text(stopped: Mapping[str, Any]) -> str:
    if stopped.get("source") != "script":
        return f"all ranks stopped at step {stopped.get('step')}, checkpoint {stopped.get('checkpoint')}"
    path, saved, asked = stopped.get("checkpoint"), stopped.get("checkpoint_mtime"), stopped.get("signal_time")
    if not path:
        return "the script exited cleanly, but its checkpoint directory is empty: it saved nothing ddpctl can see"
    if isinstance(saved, (int, float)) and isinstance(asked, (int, float)):
        # A file's mtime comes from the kernel's coarse clock, up to a tick behind time.time(): a save right at
        # the request can read as a few milliseconds before it.
        delta = saved - asked if abs(saved - asked) > MTIME_SLACK_S else 0.0
        lost = "nothing lost" if delta >= 0 else f"the steps of the {-delta:.1f} s before the request are lost"
        side = "after" if delta >= 0 else "before"
        when = f"{abs(delta):.1f} s {side} the stop request" if delta else "at the stop request"
        return f"the script saved its own checkpoint {path} {when} and exited cleanly ({lost})"
    return f"the script exited cleanly; its newest checkpoint is {path}"


def own_resume_note(facts: AttemptFacts) -> str | None:
    """How an attempt of a script with its own checkpoints of a known kind began (pure; None: not such a script).
    The first attempt too, when a checkpoint was already there: another run's, that the script will resume."""
    point, head = facts.point, f"attempt {facts.attempt}"
    if facts.scratch is not None:
        return facts.scratch.text()
    if point is None or (facts.attempt == 0 and point.checkpoint is None):
        return None
    if point.checkpoint is None:
        return f"{head}: no complete checkpoint of the script's kind in checkpoint.dir: it started from scratch"
    what = f"step {point.step} ({point.checkpoint})" if point.step is not None else point.checkpoint
    if point.args:
        return f"{head}: resumed from {what}, given {' '.join(point.args)}"
    return f"{head}: {what} was there; the script loads it by itself (ddpctl cannot tell whether it did)"


def restart_note(facts: AttemptFacts, previous: AttemptFacts | None) -> str | None:
    """How attempt n ≥ 1 began: resumed from a checkpoint, or restarted from scratch (pure)."""
    return own_resume_note(facts) or runtime_note(facts, previous)


def runtime_note(facts: AttemptFacts, previous: AttemptFacts | None) -> str | None:
    """`restart_note` from the runtime's resume report, else from what ddpctl saw of the checkpoint directory."""
    if facts.attempt == 0 or facts.start is None:
        return None
    head = f"attempt {facts.attempt}"
    if facts.resume is not None:
        step = facts.resume.step
        found = "restarted from scratch (no complete checkpoint to resume from)" if step is None else None
        return f"{head}: {found or f'resumed from step {step}'}"
    if facts.start.checkpoints_present is False:
        # Only what ddpctl can see: a script may keep its own checkpoints elsewhere and resume from them.
        return f"{head}: no checkpoint in checkpoint.dir (DDPCTL_CKPT_DIR); the script's own resume is unknown"
    if (there := checkpoint_left(previous)) is not None:
        return f"{head}: {there}"
    if not facts.ended and not facts.listeners:
        return None  # still starting: the runtime may yet report its resume
    return f"{head}: restarted; the script does not report resuming (ddpctl cannot tell whether it loaded a checkpoint)"


def checkpoint_left(previous: AttemptFacts | None) -> str | None:
    """The script's own checkpoint the previous attempt left (its clean stop, or the local backend's kill)."""
    if previous is None:
        return None
    killed, own = previous.killed, previous.stopped
    if killed is not None and killed.checkpoint:
        return (
            f"restarted after the kill; its checkpoint {killed.checkpoint} was there to resume from "
            "(whether the script loaded it, only its own log says)"
        )
    if own is not None and own.get("source") == "script" and own.get("checkpoint"):
        return f"restarted; the script's own checkpoint {own['checkpoint']} was there to resume from"
    return None


def read_facts(layout: RunLayout, past: RunHistory | None = None) -> list[AttemptFacts]:
    """Per attempt, what the run's history (`past`; read here when None) and marker files say (bounded reads)."""
    past = past if past is not None else history.load(layout.events)
    return [
        AttemptFacts(
            attempt=a,
            signal=attempt.signal,
            stopped=stop.as_json() if (stop := attempt.first(Stopped)) is not None else None,
            listeners=read_listeners(layout, a),
            resume=attempt.resume,
            start=attempt.start,
            ended=past.ended(a),
            failed=attempt.first(Hung),
            killed=attempt.first(StopKilled),
            point=attempt.first(ResumePoint),
            scratch=attempt.first(ScratchRestart),
            rotated=attempt.first(CheckpointRotated),
        )
        for a, attempt in past.attempts.items()
    ]


def read_listeners(layout: RunLayout, attempt: int) -> tuple[str, ...]:
    out: list[str] = []
    directory = layout.attempt_dir(attempt)
    try:
        names = sorted(p.name for p in directory.glob(LISTEN_GLOB))[:MAX_LISTENERS_READ]
    except OSError:
        return ()
    for name in names:
        data = safeio.read_json(directory / name)
        if data is not None:
            out.append(f"rank {data.get('rank')}: {data.get('how')}")
    return tuple(out)


def summary(
    layout: RunLayout, lead_s: int, now: float, past: RunHistory | None = None
) -> tuple[list[StopReport], list[str]]:
    """Every stop report and restart note of the run, oldest first."""
    facts = read_facts(layout, past)
    stops = [r for f in facts if (r := report(f, lead_s, now)) is not None]
    by_attempt = {f.attempt: f for f in facts}
    notes = []
    for f in facts:
        said = (restart_note(f, by_attempt.get(f.attempt - 1)), f.rotated.text() if f.rotated else None)
        notes += [n for n in said if n is not None]
    return stops, notes


def run_summary(layout: RunLayout, now: float, past: RunHistory | None = None) -> tuple[list[StopReport], list[str]]:
    """`summary` with the run's own lead time (from its job.yaml; 120 s when that cannot be read)."""
    try:
        from ddpctl.spec import load_spec

        lead_s = load_spec(layout.spec_file, check_paths=False).requeue.lead_s
    except Exception:  # a damaged job.yaml must not hide the rest of the status
        lead_s = 120
    return summary(layout, lead_s, now, past)


def launchers_up(layout: RunLayout) -> bool:
    """Whether every node's launcher of the newest attempt has started (written its node record)."""
    attempts = attempts_in(p.name for p in layout.root.glob(ATTEMPT_GLOB))
    try:
        from ddpctl.spec import load_spec

        nodes = load_spec(layout.spec_file, check_paths=False).nodes
    except Exception:  # no readable job.yaml: nothing to wait for
        return True
    return bool(attempts) and launchers_armed(layout, attempts[-1], nodes)


def launchers_armed(layout: RunLayout, attempt: int, nodes: int) -> bool:
    """Every node's launcher of `attempt` has armed its stop handler (it writes its node record after)."""
    return all(layout.node_info(attempt, rank).exists() for rank in range(nodes))


def listening_now(layout: RunLayout, script_signal: str | None) -> str | None:
    """For `preempt`: None when some rank of the newest attempt listens (or the script asked for a signal);
    else the plain statement that this stop will not be acted on."""
    attempts = attempts_in(p.name for p in layout.root.glob(ATTEMPT_GLOB))
    if script_signal or (attempts and read_listeners(layout, attempts[-1])):
        return None
    return (
        "no rank of this job has announced that it listens for stops: unless the script handles them on its "
        "own, it keeps training until it ends or is killed, and work since its own last checkpoint is lost; " + HOW_TO
    )
