"""Rich rendering of one `ddpctl top` frame (imported only by the top command: rich stays off other paths).

Every cell is a rich Text built from plain strings, never markup: node names and log lines come from the run
dir and must not be able to style or rewrite the screen.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ddpctl.health.rates import duration
from ddpctl.health.view import NodeRow, RankRow, fits, node_rows, visible_cut
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState


def _num(value: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def _flags(stall: bool | int, straggler: bool | int, pause: str = "") -> Text:
    text = Text()
    if stall:
        text.append("STALL" if stall is True else f"{stall} STALL", style="bold red")
    elif pause:  # a pause the script declared, within its allowance: not a stall (the watchdog agrees)
        text.append(f"PAUSE {visible_cut(pause, 20)}", style="cyan")
    if straggler:
        text.append(" " if text else "")
        text.append("STRAGGLER" if straggler is True else f"{straggler} STRAG", style="bold yellow")
    return text


def title(record: JobRecord, state: JobState, snap: dict[str, Any]) -> Text:
    summary = snap.get("summary")
    parts = [
        f"{visible_cut(record.job_id, 40)} {visible_cut(record.name, 40)} {state.state}",
        f"attempt {snap.get('attempt')}" if snap.get("attempt") is not None else "no attempt yet",
    ]
    if summary is not None and state.state == "RUNNING":  # a finished job's last rates are no forecast
        total = f"/{summary.total_steps}" if summary.total_steps is not None else ""
        parts.append(f"step {summary.step}{total}")
        if summary.steps_per_s is not None:
            parts.append(f"{summary.steps_per_s:.2f} st/s")
        if summary.samples_per_s is not None:
            parts.append(f"{summary.samples_per_s:.0f} samp/s")
        if summary.eta_s is not None:
            parts.append(f"ETA {duration(summary.eta_s)}")
        if summary.paused:
            parts.append(f"paused ({visible_cut(summary.paused, 40)})")
    return Text(" | ".join(parts), style="bold")


def rank_table(rows: list[RankRow]) -> Table:
    table = Table(expand=True, pad_edge=False, padding=(0, 1), show_edge=False)
    for name, justify in (
        ("rank", "right"),
        ("node", "left"),
        ("step", "right"),
        ("step s", "right"),
        ("lag", "right"),
        ("idle", "right"),
        ("flags", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("last log line", no_wrap=True, overflow="ellipsis", ratio=1)
    for row in rows:
        table.add_row(
            Text(str(row.rank)),
            Text(visible_cut(row.node, 20)),
            Text(_num(row.step, "{}")),
            Text(_num(row.step_s)),
            Text(_num(row.lag, "{}")),
            Text(_num(row.since_s, "{:.0f}s")),
            _flags(row.stall, row.straggler, row.pause),
            Text(row.line),
        )
    return table


def node_table(nodes: list[NodeRow]) -> Table:
    table = Table(expand=False, pad_edge=False, padding=(0, 1), show_edge=False)
    for name in ("node", "ranks", "steps", "step s", "idle", "flags"):
        table.add_column(name, no_wrap=True)
    for node in nodes:
        steps = (
            "-"
            if node.step_min is None
            else (f"{node.step_min}" if node.step_min == node.step_max else f"{node.step_min}-{node.step_max}")
        )
        table.add_row(
            Text(visible_cut(node.node, 20)),
            Text(str(node.ranks)),
            Text(steps),
            Text(_num(node.step_s)),
            Text(_num(node.since_s, "{:.0f}s")),
            _flags(node.stalls, node.stragglers),
        )
    return table


def frame(record: JobRecord, state: JobState, snap: dict[str, Any], size: Any) -> RenderableType:
    height = max(10, int(getattr(size, "height", 24)))
    rows: list[RankRow] = snap.get("rows", [])
    notes = [
        Text(visible_cut(text, 300), style="red" if severe else "yellow", overflow="ellipsis", no_wrap=True)
        for text, severe in snap.get("notes", [])[-2:]
    ]
    # The newest cause (already made visible by cause_lines): why the attempt on screen is not the first.
    notes += [Text(line, style="yellow", overflow="ellipsis", no_wrap=True) for line in snap.get("causes", [])[-1:]]
    parts: list[RenderableType] = [title(record, state, snap)]
    if not rows:
        parts.append(Text("no rank has started yet (no rank log in the attempt directory)"))
    elif fits(len(rows), height - len(notes)):
        parts.append(rank_table(rows))
    else:
        nodes = node_rows(rows)
        flagged = [r for r in rows if r.stall or r.straggler]
        room = height - len(notes) - len(nodes) - 8
        parts.append(
            Text(
                f"{len(rows)} ranks on {len(nodes)} nodes, per node (a taller terminal lists every rank)",
                style="dim",
                overflow="ellipsis",
                no_wrap=True,
            )
        )
        parts.append(node_table(nodes[: max(1, height - len(notes) - 6)]))
        if flagged and room > 2:
            shown = flagged[: room - 1]
            parts.append(rank_table(shown))
            if len(flagged) > len(shown):
                parts.append(Text(f"... and {len(flagged) - len(shown)} more flagged ranks", style="dim"))
    parts += notes
    return Group(*parts)


def ended_line(job_id: str, state: JobState) -> str:
    return f"job {job_id} ended: {state.state}" + (f" ({state.reason})" if state.reason else "")
