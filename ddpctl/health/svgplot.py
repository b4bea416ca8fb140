"""Inline SVG charts for the run report (pure: strings in, an SVG element out; no plotting library, no script).

Every text that reaches the SVG (labels, titles, a rank-provided value name) goes through `esc`: a rank writes
its own value names and a node its own name, so the report treats them as untrusted. Each chart is an `<svg>`
with `data-chart`, and each drawn series a `<polyline>` with `data-series` and `data-points` (its point count),
so a test (or a reader) can find what was drawn without parsing coordinates.
"""

from __future__ import annotations

import html
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH, HEIGHT = 860, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 28, 36
MAX_DRAWN = 1200  # points per line: more add bytes, not detail, at this width
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class Line:
    label: str
    points: list[tuple[float, float]]


@dataclass
class Mark:
    """A vertical marker at x (a resume point, a stop), labelled."""

    x: float
    label: str


@dataclass
class Span:
    """One bar of a timeline: an attempt from start to end, its label and its markers."""

    label: str
    start: float
    end: float
    kind: str = ""  # picks the colour: "ok", "stop", "failure", "running"
    marks: list[Mark] = field(default_factory=list)


def _bounds(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if high == low:
        pad = abs(high) * 0.05 or 1.0
        return low - pad, high + pad
    return low, high


def tick(value: float, as_time: bool) -> str:
    if as_time:
        return time.strftime("%H:%M:%S", time.gmtime(value))
    return f"{value:.4g}"


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    every = max(1, math.ceil(len(points) / MAX_DRAWN))
    return points[::every] if every > 1 else points


def segments(points: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """The line cut where x jumps by more than 10x its median step (a requeue's gap): no line drawn across it."""
    if len(points) < 3:
        return [points]
    steps = sorted(b[0] - a[0] for a, b in itertools.pairwise(points))
    limit = max(steps[len(steps) // 2] * 10, 1e-9)
    out = [[points[0]]]
    for before, point in itertools.pairwise(points):
        if point[0] - before[0] > limit:
            out.append([])
        out[-1].append(point)
    return out


def line_chart(
    name: str, lines: Sequence[Line], *, x_label: str, y_label: str, marks: Sequence[Mark] = (), x_time: bool = False
) -> str:
    """Lines over x, a legend on the right, vertical markers; an empty chart says so instead of drawing axes."""
    drawn = [Line(line.label, _thin(line.points)) for line in lines if line.points]
    if not drawn:
        return f'<p class="empty" data-chart="{esc(name)}">no data for this chart</p>'
    xs = [x for line in drawn for x, _ in line.points] + [m.x for m in marks]
    ys = [y for line in drawn for _, y in line.points]
    (x0, x1), (y0, y1) = _bounds(xs), _bounds(ys)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    parts = [_axes((x0, x1, y0, y1), x_label, y_label, x_time)]
    for mark in marks:
        parts.append(
            f'<line class="mark" x1="{px(mark.x):.1f}" x2="{px(mark.x):.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
            f'stroke="#999" stroke-dasharray="4 3"><title>{esc(mark.label)}</title></line>'
            f'<text x="{px(mark.x) - 3:.1f}" y="{TOP + 10}" font-size="10" fill="#666" text-anchor="end">'
            f"{esc(mark.label)}</text>"
        )
    for index, line in enumerate(drawn):
        color = COLORS[index % len(COLORS)]
        for piece in segments(line.points):
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in piece)
            parts.append(
                f'<polyline data-series="{esc(line.label)}" data-points="{len(piece)}" fill="none" '
                f'stroke="{color}" stroke-width="1.5" points="{coords}"><title>{esc(line.label)}</title></polyline>'
            )
        parts.append(
            f'<text x="{WIDTH - RIGHT + 8}" y="{TOP + 14 * index + 10}" font-size="11" fill="{color}">'
            f"{esc(line.label[:24])}</text>"
        )
    return _svg(name, "".join(parts))


def _axes(box: tuple[float, float, float, float], x_label: str, y_label: str, x_time: bool) -> str:
    x0, x1, y0, y1 = box
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    out = [
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 4}" font-size="11" text-anchor="middle">{esc(x_label)}</text>',
        f'<text x="12" y="{TOP + plot_h / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {TOP + plot_h / 2})">{esc(y_label)}</text>',
    ]
    for i in range(5):
        fx, fy = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        out.append(
            f'<text x="{LEFT + plot_w * i / 4:.1f}" y="{TOP + plot_h + 14}" font-size="10" text-anchor="middle">'
            f"{esc(tick(fx, x_time))}</text>"
            f'<text x="{LEFT - 4}" y="{TOP + plot_h - plot_h * i / 4 + 3:.1f}" font-size="10" text-anchor="end">'
            f"{esc(tick(fy, False))}</text>"
        )
    return "".join(out)


def _svg(name: str, body: str, height: int = HEIGHT) -> str:
    return (
        f'<svg class="chart" data-chart="{esc(name)}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}">{body}</svg>'
    )


SPAN_COLORS = {"ok": "#2ca02c", "stop": "#1f77b4", "failure": "#d62728", "running": "#ff7f0e"}


def timeline(name: str, spans: Sequence[Span]) -> str:
    """One row per attempt on a shared wall-clock axis, markers (stops, exclusions, preflights) on its row."""
    if not spans:
        return f'<p class="empty" data-chart="{esc(name)}">no attempt recorded yet</p>'
    x0, x1 = _bounds([s.start for s in spans] + [s.end for s in spans])
    row, plot_w = 30, WIDTH - LEFT - 20
    height = TOP + row * len(spans) + BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    parts = []
    for index, span in enumerate(spans):
        y = TOP + row * index
        width = max(2.0, px(span.end) - px(span.start))
        parts.append(
            f'<rect class="attempt" data-attempt="{index}" x="{px(span.start):.1f}" y="{y}" width="{width:.1f}" '
            f'height="{row - 8}" fill="{SPAN_COLORS.get(span.kind, "#7f7f7f")}" opacity="0.75">'
            f"<title>{esc(span.label)}</title></rect>"
            f'<text x="{px(span.start) + 4:.1f}" y="{y + 15}" font-size="11">{esc(span.label[:110])}</text>'
        )
        for mark in span.marks:
            parts.append(
                f'<circle class="event" cx="{px(mark.x):.1f}" cy="{y + row - 8}" r="4" fill="#000">'
                f"<title>{esc(mark.label)}</title></circle>"
            )
    parts.append(
        f'<text x="{LEFT}" y="{height - 8}" font-size="10">{esc(tick(x0, True))} UTC</text>'
        f'<text x="{LEFT + plot_w}" y="{height - 8}" font-size="10" text-anchor="end">{esc(tick(x1, True))} UTC</text>'
    )
    return _svg(name, "".join(parts), height)


def busy_bars(name: str, rows: Sequence[tuple[str, float, float]]) -> str:
    """Per rank, the median step split into busy (computing) and waiting for the others (label, busy, wait)."""
    if not rows:
        return f'<p class="empty" data-chart="{esc(name)}">no busy/wait data yet</p>'
    top = max(busy + wait for _, busy, wait in rows) or 1.0
    row, plot_w = 20, WIDTH - LEFT - RIGHT - 60
    parts = []
    for index, (label, busy, wait) in enumerate(rows):
        y, bw, ww = TOP + row * index, busy / top * plot_w, wait / top * plot_w
        parts.append(
            f'<text x="{LEFT + 56}" y="{y + 13}" font-size="11" text-anchor="end">{esc(label[:30])}</text>'
            f'<rect class="busy" data-value="{busy:.6g}" x="{LEFT + 60}" y="{y}" width="{bw:.1f}" height="{row - 4}" '
            f'fill="#1f77b4"><title>busy {busy:.4g} s</title></rect>'
            f'<rect class="wait" data-value="{wait:.6g}" x="{LEFT + 60 + bw:.1f}" y="{y}" width="{ww:.1f}" '
            f'height="{row - 4}" fill="#ffbb78"><title>waiting {wait:.4g} s</title></rect>'
            f'<text x="{LEFT + 64 + bw + ww:.1f}" y="{y + 13}" font-size="10">'
            f"{busy:.3g} s busy, {wait:.3g} s wait</text>"
        )
    return _svg(name, "".join(parts), TOP + row * len(rows) + 10)
