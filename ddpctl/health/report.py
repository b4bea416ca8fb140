"""What `status` adds from the run dir: progress figures, the last complete checkpoint, hangs and stragglers,
and what the nodes' checks (the preflight, and during training) cost and found."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ddpctl import sanitize
from ddpctl.health import mfu
from ddpctl.health.rates import duration, summarize
from ddpctl.health.records import checked_progress_records, last_checkpoint, latest_attempt
from ddpctl.run import history, resumepoint
from ddpctl.run.history import (
    HealthEvent,
    Hung,
    NodeChecked,
    NodeLost,
    NodeRechecked,
    OomKilled,
    RunHistory,
    SlowedDown,
    StragglerFlagged,
)
from ddpctl.run.history.base import E
from ddpctl.run.layout import RunLayout
from ddpctl.spec import HealthSettings, JobSpec, load_spec

MAX_CHECKS = 64  # preflight records kept in the report (a node each, the newest attempts' last)


MAX_CHECKPOINT_ENTRIES = 10_000  # a checkpoint directory is looked at this far


def checkpoint_dir(layout: RunLayout) -> Path:
    try:
        spec = load_spec(layout.spec_file, check_paths=False)
    except Exception:  # an unreadable job.yaml: fall back to the default place
        return layout.default_checkpoints
    return layout.checkpoints(spec.checkpoint.dir)


def health_settings(layout: RunLayout) -> HealthSettings:
    """The run's `health:` settings, as its watchdog reads them (the defaults for an unreadable job.yaml)."""
    spec = run_spec(layout)
    return spec.health if spec is not None else HealthSettings()


def run_spec(layout: RunLayout) -> JobSpec | None:
    """The run's spec (job.yaml in the run dir), or None when it cannot be read."""
    try:
        return load_spec(layout.spec_file, check_paths=False)
    except Exception:
        return None


def newest_checkpoint(layout: RunLayout) -> Path | None:
    """The newest complete checkpoint (runtime.Checkpointer's `step-N` with its COMPLETE marker); for a script
    whose checkpoints a `resume:` preset or `checkpoint.pattern` describes, the one the next attempt resumes
    from (a Trainer's `checkpoint-80/`, never the README.md it writes beside); for another script with
    checkpoints of its own, the newest entry of the checkpoint directory (bounded; links not followed)."""
    directory = checkpoint_dir(layout)
    found = last_checkpoint(directory)
    if found is not None:
        return directory / f"step-{found[0]}"
    spec = run_spec(layout)
    if spec is not None and resumepoint.rule_of(spec) is not None:
        own = resumepoint.resume_point(spec, directory)
        return directory / own.name if own is not None else None
    import os

    newest: tuple[float, str] | None = None
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_CHECKPOINT_ENTRIES:
                    break
                if not entry.name.startswith("."):
                    newest = max(newest or (0.0, ""), (entry.stat(follow_symlinks=False).st_mtime, entry.name))
    except OSError:
        return None
    return directory / newest[1] if newest else None


def collect(run_dir: Path, running: bool, now: float | None = None, past: RunHistory | None = None) -> dict[str, Any]:
    """Progress (only while running: a finished job's last rate is no ETA), checkpoint, health events (from
    `past`, the run's history as the caller read it; read here when None)."""
    now = time.time() if now is None else now
    layout = RunLayout(run_dir)
    out: dict[str, Any] = {}
    attempt = latest_attempt(layout)
    if running and attempt is not None:
        records, notes = checked_progress_records(layout, attempt)
        if records:
            spec = run_spec(layout)
            figures = summarize(records, now, (spec.health if spec else HealthSettings()).pause_s).as_json()
            out["progress"] = {"attempt": attempt, "ranks": len(records), **figures}
            util = mfu.of_records(records, figures["samples_per_s"], spec.mfu if spec else None)
            out["mfu"] = {**util.as_json(), "asked": bool(spec and (spec.mfu.flops or spec.mfu.peak_tflops))}
        if notes:
            out["record_notes"] = notes
    found = last_checkpoint(checkpoint_dir(layout))
    if found is not None:
        out["checkpoint"] = {"step": found[0], "time": found[1], "age_s": round(now - found[1], 1)}
    past = past if past is not None else history.load(layout.events)
    events = past.health()
    out["hangs"] = [e.as_json() for e in events if isinstance(e, Hung)]
    out["stragglers"] = [e.as_json() for e in events if isinstance(e, StragglerFlagged)]
    out["slowdowns"] = [e.as_json() for e in events if isinstance(e, SlowedDown)]
    out["oom"] = [e.as_json() for e in events if isinstance(e, OomKilled)]
    out["nodes_lost"] = [e.as_json() for e in events if isinstance(e, NodeLost)]
    out["node_checks"] = [e.as_json() for e in events if isinstance(e, NodeRechecked)]
    out["preflight"] = [e.as_json() for e in past.all(NodeChecked)][-MAX_CHECKS:]
    return out


def _v(value: Any, limit: int = 200) -> str:
    """A value from the run dir (events, records: written by ranks, untrusted) made terminal-safe."""
    return sanitize.visible(str(value)[:limit])


def describe_event(event: HealthEvent) -> str:
    """One line for a health event (hang, straggler, oom or a lost node)."""
    if isinstance(event, Hung):
        return describe_hang(event)
    if isinstance(event, NodeLost):
        return describe_node_lost(event)
    if isinstance(event, OomKilled):
        return describe_oom(event)
    if isinstance(event, SlowedDown):
        return describe_slowdown(event)
    if isinstance(event, NodeRechecked):
        return describe_recheck(event)
    return describe_straggler(event)


def describe_recheck(event: NodeRechecked) -> str:
    """A node's check during training that failed (it ended the attempt) or could not run."""
    at = f" at step {event.step}" if event.step is not None else ""
    head = f"node check in attempt {event.attempt} on {_v(event.node)}{at}"
    if event.failed:
        return f"{head} failed: {_v(event.stage)}: {_v(event.why, 300)}; the attempt was ended, blaming the node"
    return f"{head} could not run: {_v(event.why, 300)}; not counted as a failure"


def describe_node_lost(event: NodeLost) -> str:
    return (
        f"node lost in attempt {event.attempt}: {_v(lost_name(event))}: "
        f"{_v(event.why)}; found by {_v(event.found_by)}, which ended every node's ranks"
    )


def lost_name(event: NodeLost) -> str:
    if event.node:
        return event.node
    return f"node rank {event.node_rank}" if event.node_rank is not None else "one of two nodes"


def describe_oom(event: OomKilled) -> str:
    kills, limit = event.kills, event.limit_bytes
    within = f" (memory limit {limit / 2**20:.0f} MiB)" if limit is not None else ""
    return (
        f"out of memory in attempt {event.attempt} on {_v(event.node)}: the kernel's OOM killer ended"
        f" {kills} process{'es' if kills != 1 else ''} of this node's step{within}; a rank killed by SIGKILL"
        " there ran out of memory"
    )


def describe_hang(event: Hung) -> str:
    culprits = event.culprits
    names = "; ".join(
        f"rank {_v(c.get('rank'))} on {_v(c.get('node'))} at step {_v(c.get('step'))}: {_v(c.get('where'))}"
        for c in culprits[:4]
    )
    more = f" (+{len(culprits) - 4} more)" if len(culprits) > 4 else ""
    collective = f"{_v(event.collective, 300)}; " if event.collective else ""
    return (
        f"hang in attempt {event.attempt}: {collective}no progress for {event.idle_s} s "
        f"(allowed {event.timeout_s} s); stopped first: {names or '?'}{more}{describe_nodes(event)}"
    )


def describe_nodes(event: Hung) -> str:
    """The nodes whose ranks went silent or could not be dumped (the hang event's `nodes`)."""
    parts = []
    for found in event.nodes[:8]:
        silent, undumped = found.get("silent") or [], found.get("undumped") or []
        what = []
        if silent:
            what.append(
                f"rank(s) {_v(', '.join(map(str, silent)), 80)} silent for {_v(found.get('silent_s'))} s"
                " (no heartbeat write: the process or the node stopped answering)"
            )
        if undumped:
            what.append(f"no stack dumped from rank(s) {_v(', '.join(map(str, undumped)), 80)}")
        parts.append(f"node {_v(found.get('node'))}: {' and '.join(what)}")
    return f"; {'; '.join(parts)}" if parts else ""


def describe_straggler(event: StragglerFlagged) -> str:
    return (
        f"straggler in attempt {event.attempt}: rank {event.rank} on {_v(event.node)} "
        f"busy {event.busy_s} s/step = {event.factor}x the other ranks' median "
        f"{event.median_s} s (threshold {event.threshold}x over {event.steps} steps)"
    )


def describe_slowdown(event: SlowedDown) -> str:
    against = event.baseline_s if event.versus == "its own earlier pace" else event.run_s
    return (
        f"slowdown in attempt {event.attempt}: node {_v(event.node)} at {event.step_s} s/step = {event.factor}x "
        f"{_v(event.versus, 40)} ({against} s) for {duration(event.sustained_s)} (threshold {event.threshold}x); "
        "not fatal: the run goes on"
    )


def progress_line(progress: dict[str, Any]) -> str:
    total = f" of {progress['total_steps']}" if progress.get("total_steps") is not None else ""
    head = f"  step {progress.get('step')}{total} ({progress['ranks']} ranks reporting)"
    since = duration(progress.get("last_progress_s"))
    if progress.get("stalled"):
        return f"{head}: no progress for {since} (no rate or ETA while stalled)"
    pause = f"in a declared pause ({_v(progress['paused'], 80)})" if progress.get("paused") else ""
    if pause and progress.get("steps_per_s") is None:
        return f"{head}: {pause}, last step {since} ago"
    rate = f"{progress['steps_per_s']:.2f} steps/s" if progress.get("steps_per_s") else "? steps/s"
    samples = f", {progress['samples_per_s']:.1f} samples/s" if progress.get("samples_per_s") else ""
    eta = f", ETA {duration(progress['eta_s'])}" if progress.get("eta_s") is not None else ""
    return f"{head}: {rate}{samples}{eta}; last progress {since} ago" + (f"; {pause}" if pause else "")


def typed(report: dict[str, Any], key: str, cls: type[E]) -> list[E]:
    """The events a `collect` report lists under `key`, typed again (the report is JSON for `status --json`)."""
    return [e for r in report.get(key, []) if isinstance(e := history.parse_event(r), cls)]


def text_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    if progress := report.get("progress"):
        lines.append(progress_line(progress))
    if (found := report.get("mfu")) and found.get("asked"):  # only where the spec has an mfu: block
        lines.append(f"  {_v(mfu.Mfu(found.get('value'), str(found.get('why'))).text(), 300)}")
    lines += [f"  note: {_v(note, 300)}" for note in report.get("record_notes", [])[:4]]
    if ckpt := report.get("checkpoint"):
        lines.append(f"  last complete checkpoint: step {ckpt['step']}, {duration(ckpt['age_s'])} ago")
    lines += [f"  {describe_hang(e)}" for e in typed(report, "hangs", Hung)[-3:]]
    lines += [f"  {describe_straggler(e)}" for e in typed(report, "stragglers", StragglerFlagged)[-5:]]
    lines += [f"  {describe_slowdown(e)}" for e in typed(report, "slowdowns", SlowedDown)[-5:]]
    lines += [f"  {describe_oom(e)}" for e in typed(report, "oom", OomKilled)[-3:]]
    lines += [f"  {describe_node_lost(e)}" for e in typed(report, "nodes_lost", NodeLost)[-3:]]
    lines += [f"  {describe_recheck(e)}" for e in typed(report, "node_checks", NodeRechecked)[-3:]]
    lines += [f"  {line}" for line in describe_checks(typed(report, "preflight", NodeChecked))[-2:]]
    return lines


def describe_checks(checks: list[NodeChecked]) -> list[str]:
    """One line per attempt whose nodes checked themselves: its cost (the slowest node) and who failed."""
    by_attempt: dict[int, list[NodeChecked]] = {}
    for check in checks:
        by_attempt.setdefault(check.attempt, []).append(check)
    lines = []
    for attempt, found in sorted(by_attempt.items()):
        cost = max((c.seconds or 0.0 for c in found), default=0.0)
        failed = [c for c in found if not c.ok]
        if not failed and all(c.passed for c in found):
            lines.append(f"preflight check, attempt {attempt}: {len(found)} node(s) passed in {cost:.1f} s")
            continue
        lines.append(f"preflight check, attempt {attempt}: {failures(failed)}; torchrun not started ({cost:.1f} s)")
    return lines


# What a failed stage tells of its own node, most first: its own checks, then not reaching node 0's store, then
# waiting for the group (the others' failure shows there too), then being ended from outside.
STAGE_ORDER = {"python": 0, "gpu": 0, "start": 0, "timeout": 0, "reach": 1, "join": 2, "allreduce": 2}
SHOWN_FAILURES = 4


def failures(failed: list[NodeChecked]) -> str:
    """The failed nodes, the most telling first with its reason (the decision's cause line names the blame)."""
    if not failed:
        return "a node reported another's failure"
    ordered = sorted(failed, key=lambda c: STAGE_ORDER.get(c.stage, 3))
    first, rest = ordered[0], ordered[1:SHOWN_FAILURES]
    said = [f"{_v(first.node)} ({_v(first.stage)}: {_v(first.why)})", *(f"{_v(c.node)} ({_v(c.stage)})" for c in rest)]
    more = f" and {len(ordered) - SHOWN_FAILURES} more" if len(ordered) > SHOWN_FAILURES else ""
    return f"failed on {', '.join(said)}{more}"
