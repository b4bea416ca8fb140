"""One `ddpctl top` frame's facts as JSON (`top --once --json`) and back: the live `top --cluster` asks the
cluster's ddpctl for them each interval and draws them here with the local renderer (ddpctl.cli.top_render).

Read back, every value is checked for its type (a row or a summary that is not one is left out) and every text
made visible (ddpctl.sanitize): what the cluster sends cannot style or rewrite the screen here.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from ddpctl.health.rates import Summary
from ddpctl.health.view import RankRow
from ddpctl.run.state import JobState
from ddpctl.sanitize import visible

MAX_ROWS = 100_000  # ranks of one job: far beyond any real one
MAX_TEXT = 400  # a log line or a note, cut (the renderer cuts shorter)


def as_json(job_id: str, name: str, state: JobState, facts: dict[str, Any]) -> dict[str, Any]:
    """The frame's facts (ddpctl.cli.top.frame_facts) with the job and its state, as a JSON-able object."""
    summary = facts.get("summary")
    return {
        "job_id": job_id,
        "name": name,
        "state": asdict(state),
        "attempt": facts.get("attempt"),
        "rows": [asdict(row) for row in facts.get("rows", [])],
        "summary": summary.as_json() if summary is not None else None,
        "notes": [[text, severe] for text, severe in facts.get("notes", [])],
        "causes": list(facts.get("causes", [])),
    }


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: object) -> str:
    return visible(str(value))[:MAX_TEXT] if isinstance(value, str) else ""


def row_of(data: object) -> RankRow | None:
    """A RankRow from its JSON; None when it is not one (no integer rank)."""
    if not isinstance(data, dict) or _int(data.get("rank")) is None:
        return None
    return RankRow(
        rank=data["rank"],
        node=_text(data.get("node")),
        step=_int(data.get("step")),
        step_s=_float(data.get("step_s")),
        lag=_int(data.get("lag")),
        since_s=_float(data.get("since_s")),
        line=_text(data.get("line")),
        stall=data.get("stall") is True,
        straggler=data.get("straggler") is True,
        pause=_text(data.get("pause"))[:40],
    )


def summary_of(data: object) -> Summary | None:
    if not isinstance(data, dict):
        return None
    values: dict[str, Any] = {}
    for field in fields(Summary):
        value = data.get(field.name)
        if field.name == "stalled":
            values[field.name] = value is True
        elif field.name == "paused":
            values[field.name] = _text(value)[:80] or None
        elif field.name in ("step", "total_steps"):
            values[field.name] = _int(value)
        else:
            values[field.name] = _float(value)
    return Summary(**values)


def state_of(data: object) -> JobState:
    raw = data if isinstance(data, dict) else {}
    return JobState(
        state=_text(raw.get("state"))[:40] or "UNKNOWN",
        restarts=_int(raw.get("restarts")) or 0,
        reason=_text(raw.get("reason")),
        nodes=_text(raw.get("nodes")),
        elapsed=_text(raw.get("elapsed"))[:40],
        exit_code=_int(raw.get("exit_code")),
    )


def facts_of(data: dict[str, Any]) -> dict[str, Any]:
    """The frame's facts from `as_json`'s object, checked and made visible (for ddpctl.cli.top_render.frame)."""
    raw_rows = data.get("rows")
    rows = [row for item in (raw_rows if isinstance(raw_rows, list) else [])[:MAX_ROWS] if (row := row_of(item))]
    notes = data.get("notes")
    causes = data.get("causes")
    return {
        "attempt": _int(data.get("attempt")),
        "rows": rows,
        "summary": summary_of(data.get("summary")),
        "notes": [
            (_text(note[0]), note[1] is True)
            for note in (notes if isinstance(notes, list) else [])
            if isinstance(note, list) and len(note) == 2
        ][-2:],
        "causes": [_text(cause) for cause in (causes if isinstance(causes, list) else []) if isinstance(cause, str)][
            -1:
        ],
    }
