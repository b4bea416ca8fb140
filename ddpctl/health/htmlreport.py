"""The run report: one self-contained HTML file (inline CSS and SVG; no script, no network when opened).

`run_page` shows one run: its state and reason, the attempts on a timeline with their causes, step time and
throughput per node over time, the loss and the user's scalars across attempts with the resume points, busy vs.
waiting per rank, the spec and the code snapshot. `sweep_page` shows a sweep's points side by side. Every text
goes through `esc`: node names, value names and reasons come from the ranks and the run dir. Paths under the
home directory (the run dir, the spec's paths, checkpoints, the code's source) are shown as `~/...`
(`home_relative`, over the whole page): a report is shared with colleagues, and the reader's home is not the
writer's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ddpctl.health import runreport as rr
from ddpctl.health.report import describe_slowdown
from ddpctl.health.svgplot import Line, busy_bars, esc, line_chart, timeline
from ddpctl.run.history import SlowedDown

STYLE = (
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}"
    "pre{background:#f6f6f6;padding:10px;overflow:auto;font-size:12px}.state{font-weight:bold}"
    ".empty{color:#888;font-style:italic}.problems{color:#a40}"
)


@dataclass
class Header:
    """What the registry and the backend say about the job (the history says the rest)."""

    name: str
    job_id: str
    state: str
    reason: str
    backend: str
    code: str  # the code snapshot's line (ddpctl.snapshot.summary)


def home_relative(text: str, home: str | None = None) -> str:
    """`text` with each path in the home directory (HOME) written from `~`: `/home/ann/runs/x` is `~/runs/x`."""
    if home is None:
        try:
            home = str(Path("~").expanduser())
        except RuntimeError:  # no HOME and no passwd entry: nothing to shorten
            return text
    home = home.rstrip("/")
    if not home:  # HOME is /
        return text
    return re.sub(r"(?<![\w./~-])" + re.escape(home) + r"(?=/|$|[\s'\",;:)\]<&])", "~", text)


def page(title: str, body: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>{home_relative(''.join(body))}</body></html>\n"
    )


def run_page(head: Header, data: rr.RunData) -> str:
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data.now))
    body = [
        f"<h1>ddpctl report: {esc(head.name)} (job {esc(head.job_id)})</h1>",
        f'<p>state <span class="state" id="state">{esc(head.state)}</span>'
        f"{' — ' + esc(head.reason) if head.reason else ''}; backend {esc(head.backend)}; "
        f"{len(data.history.attempts)} attempt(s); written {esc(made)}"
        f"{'' if head.state not in ('RUNNING', 'PENDING', 'REQUEUED') else ' (a snapshot of a running job)'}</p>",
        f'<p id="code">{esc(head.code)}</p>',
        *_problems(data.problems),
        *sections(data),
        "<h2>Spec</h2>",
        f'<pre id="spec">{esc(data.spec_text) or "(no spec copy in the run dir)"}</pre>',
        f"<p>run dir {esc(data.run_dir)}</p>",
    ]
    return page(f"ddpctl report: {head.name}", body)


def _problems(problems: list[str]) -> list[str]:
    if not problems:
        return []
    items = "".join(f"<li>{esc(p)}</li>" for p in problems[:50])
    return [f'<div class="problems" id="problems"><p>Not everything could be read:</p><ul>{items}</ul></div>']


def sections(data: rr.RunData) -> list[str]:
    series = data.series
    out = [
        "<h2>Attempts</h2>",
        timeline("attempts", rr.spans(data.history, data.now)),
        _attempt_table(data),
        "<h2>Step time per node</h2>",
        line_chart("step-time", rr.step_lines(series), x_label="time (UTC)", y_label="seconds a step", x_time=True),
        "<h2>Throughput per node</h2>",
        line_chart("throughput", rr.rate_lines(series), x_label="time (UTC)", y_label="samples/s", x_time=True),
        f'<p id="mfu">{esc(data.mfu.text()) if data.mfu else "MFU unknown"}</p>',
        *_slowdowns(data),
    ]
    marks = rr.resume_marks(data.history)
    for name in rr.value_names(series):
        out.append(f"<h2>{esc(name)} across attempts</h2>")
        lines = rr.value_lines(series, name)
        out.append(line_chart(f"value-{name}", lines, x_label="step", y_label=name, marks=marks))
    if not rr.value_names(series):
        out += ["<h2>Loss across attempts</h2>", line_chart("value-loss", [], x_label="step", y_label="loss")]
    out += ["<h2>Busy vs. waiting per rank (newest attempt)</h2>", busy_bars("busy", rr.busy_rows(series))]
    return out


def _slowdowns(data: rr.RunData) -> list[str]:
    found = [e for e in data.history.health() if isinstance(e, SlowedDown)]
    if not found:
        return ['<p id="slowdowns" class="empty">no slowdown found (a node slow for minutes)</p>']
    items = "".join(f"<li>{esc(describe_slowdown(e))}</li>" for e in found[-20:])
    return [f'<ul id="slowdowns">{items}</ul>']


def _attempt_table(data: rr.RunData) -> str:
    rows = []
    for number, this in data.history.attempts.items():
        label, _ = rr.describe_attempt(this)
        resume = this.resume
        resumed = "-" if resume is None else ("scratch" if resume.step is None else f"step {resume.step}")
        cause = this.decision.cause_why if this.decision is not None and this.decision.cause_why else ""
        rows.append(f"<tr><td>{number}</td><td>{esc(label)}</td><td>{esc(resumed)}</td><td>{esc(cause)}</td></tr>")
    head = "<tr><th>#</th><th>attempt</th><th>resumed from</th><th>cause</th></tr>"
    return f'<table id="attempt-table">{head}{"".join(rows)}</table>'


@dataclass
class SweepTask:
    task: str
    point: str  # the grid values
    state: str
    data: rr.RunData


def sweep_page(name: str, sweep_id: str, tasks: Sequence[SweepTask]) -> str:
    rows = []
    for task in tasks:
        final = _last_value(task.data, "loss")
        rows.append(
            f"<tr><td>{esc(task.task)}</td><td>{esc(task.point)}</td><td>{esc(task.state)}</td>"
            f"<td>{len(task.data.history.attempts)}</td><td>{'-' if final is None else f'{final:.4g}'}</td></tr>"
        )
    table = "<tr><th>task</th><th>point</th><th>state</th><th>attempts</th><th>last loss</th></tr>"
    body = [
        f"<h1>ddpctl report: sweep {esc(name)} ({esc(sweep_id)}, {len(tasks)} points)</h1>",
        f'<table id="points">{table}{"".join(rows)}</table>',
    ]
    names = {n for task in tasks for n in rr.value_names(task.data.series)} or {"loss"}
    for value in sorted(names, key=lambda n: (n != "loss", n))[: rr.MAX_VALUE_CHARTS]:
        lines = [Line(task.point or task.task, _joined(task.data, value)) for task in tasks]
        body += [f"<h2>{esc(value)} per point</h2>", line_chart(f"value-{value}", lines, x_label="step", y_label=value)]
    for task in tasks:
        body += [
            f"<h2>Task {esc(task.task)}: {esc(task.point)}</h2>",
            timeline(f"attempts-{task.task}", rr.spans(task.data.history, task.data.now)),
        ]
        body += _problems(task.data.problems)
    return page(f"ddpctl report: sweep {name}", body)


def _joined(data: rr.RunData, name: str) -> list[tuple[float, float]]:
    return sorted(point for line in rr.value_lines(data.series, name) for point in line.points)


def _last_value(data: rr.RunData, name: str) -> float | None:
    points = _joined(data, name)
    return points[-1][1] if points else None
