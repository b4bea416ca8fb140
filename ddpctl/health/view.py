"""The model behind `ddpctl top` (pure, no rich): one row per rank, or per node when the ranks do not fit.

A rank is a STALL when it has not progressed for STALL_STEPS x its median step time (at least STALL_MIN_S; before
its first step, for the start-up allowance health.startup_s) plus, while it is in a pause it declared, that pause's
allowance (as the hang watchdog counts it: health.hang), a
STRAGGLER when the straggler rule flags it now or a `straggler` event named it in this attempt. Lag is in steps
behind the fastest rank. The last log line is made visible (control characters escaped) before any terminal
sees it: rank output is untrusted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ddpctl import sanitize
from ddpctl.health.hang import pause_of
from ddpctl.health.rates import STALL_MIN_S, STALL_STEPS, progress_time  # one stall rule: top and status agree
from ddpctl.health.straggler import find_stragglers
from ddpctl.spec import HealthSettings

LINE_MAX = 200


def visible_cut(text: str, limit: int = LINE_MAX) -> str:
    """A rank's log line made terminal-safe exactly as `ddpctl logs` shows it, cut to at most `limit` chars."""
    shown = sanitize.visible(text[: limit * 2])
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


@dataclass(frozen=True)
class RankRow:
    rank: int
    node: str
    step: int | None
    step_s: float | None
    lag: int | None
    since_s: float | None
    line: str
    stall: bool
    straggler: bool
    pause: str = ""  # the declared pause the rank is in (its name), shown instead of a STALL


@dataclass(frozen=True)
class NodeRow:
    node: str
    ranks: int
    step_min: int | None
    step_max: int | None
    step_s: float | None  # slowest median step among its ranks
    since_s: float | None  # the longest silence among its ranks
    stalls: int
    stragglers: int


def rank_rows(
    records: Mapping[int, Mapping[str, Any]],
    logs: Mapping[int, tuple[str, float | None]],
    *,
    nodes: Mapping[int, str],
    flagged: Iterable[int],
    policy: HealthSettings,
    now: float,
) -> list[RankRow]:
    """`logs`: rank -> (last log line, log mtime); a rank without a progress record goes by its log's age."""
    steps = [r["step"] for r in records.values() if isinstance(r.get("step"), int)]
    fastest = max(steps) if steps else None
    live = {s.rank for s in find_stragglers(records, policy.straggler_factor, policy.straggler_steps)}
    flagged = set(flagged) | live
    rows = []
    for rank in sorted(set(records) | set(logs)):
        record = records.get(rank, {})
        step = record.get("step") if isinstance(record.get("step"), int) else None
        step_s = record.get("step_s") if isinstance(record.get("step_s"), (int, float)) else None
        line, mtime = logs.get(rank, ("", None))
        last = progress_time(record) if step is not None else None
        seen = last if last is not None else mtime
        since = max(0.0, now - seen) if seen is not None else None
        pause = pause_of(record, policy.pause_s)
        # Before its first step a rank is starting (torch import, rendezvous, data loading): silence then is normal
        # start-up, allowed as long as the hang watchdog allows it (health.startup_s), not a few step times.
        limit = (max(STALL_MIN_S, STALL_STEPS * (step_s or 0.0)) if step is not None else float(policy.startup_s)) + (
            pause[0] if pause else 0.0
        )
        done = record.get("phase") == "done"
        rows.append(
            RankRow(
                rank,
                str(record.get("node") or nodes.get(rank, "?")),
                step,
                step_s,
                fastest - step if step is not None and fastest is not None else None,
                since,
                visible_cut(line),
                since is not None and since > limit and not done,
                rank in flagged,
                visible_cut(pause[1], 40) if pause else "",
            )
        )
    return rows


def node_rows(rows: list[RankRow]) -> list[NodeRow]:
    by_node: dict[str, list[RankRow]] = {}
    for row in rows:
        by_node.setdefault(row.node, []).append(row)
    out = []
    for node, group in sorted(by_node.items()):
        steps = [r.step for r in group if r.step is not None]
        times = [r.step_s for r in group if r.step_s is not None]
        since = [r.since_s for r in group if r.since_s is not None]
        out.append(
            NodeRow(
                node,
                len(group),
                min(steps, default=None),
                max(steps, default=None),
                max(times, default=None),
                max(since, default=None),
                sum(r.stall for r in group),
                sum(r.straggler for r in group),
            )
        )
    return out


def fits(rows: int, height: int, chrome: int = 7) -> bool:
    """Whether one line per rank fits a terminal of `height` lines (title, table borders, footer)."""
    return rows + chrome <= height
