"""Which collective a hang waits in, and which rank never entered it, from the ranks' flight-recorder dumps (pure).

Each dump (ddpctl.runtime.flightrec) lists a rank's newest collectives as PyTorch's flight recorder keeps them:
per process group a sequence number (`collective_seq_id`, the same on every rank for the same collective), the
op (`profiling_name`, e.g. "gloo:all_reduce"), the tensor sizes, and whether it completed (`retired`, or state
"completed"). In a hang the others wait in collective #N of a group: they entered it and did not complete it.
A rank whose newest entry in that group is below N never entered it: that rank is the one they wait for.
Point-to-point ops (their own sequence) are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Dump = Mapping[str, Any]


@dataclass(frozen=True)
class Collective:
    group: str
    seq: int
    op: str
    sizes: str
    done: bool

    def __str__(self) -> str:
        where = "" if self.group in ("0", "") else f" (group {self.group})"
        return f"{self.op} #{self.seq}{where}"

    def as_json(self) -> dict[str, Any]:
        return {"group": self.group, "seq": self.seq, "op": self.op, "sizes": self.sizes}


def entries(dump: Dump) -> list[Collective]:
    found = []
    for raw in dump.get("entries") or []:
        if not isinstance(raw, dict) or raw.get("is_p2p"):
            continue
        seq = raw.get("collective_seq_id")
        if not isinstance(seq, int) or isinstance(seq, bool):
            continue
        group = raw.get("process_group")
        name = str(group[0]) if isinstance(group, list) and group else "?"
        op = str(raw.get("profiling_name") or "?").split(":")[-1]
        done = raw.get("retired") is True or raw.get("state") == "completed"
        found.append(Collective(name[:40], seq, op[:60], sizes(raw.get("input_sizes")), done))
    return found


def sizes(shapes: Any) -> str:
    """[[3, 4], [5]] -> "[3, 4], [5]" (at most 8 shapes; untrusted: clipped)."""
    if not isinstance(shapes, list):
        return "?"
    return ", ".join(str(s)[:40] for s in shapes[:8])[:200]


def last(found: list[Collective], group: str, *, done: bool = False) -> Collective | None:
    mine = [c for c in found if c.group == group and (c.done or not done)]
    return max(mine, key=lambda c: c.seq, default=None)


@dataclass(frozen=True)
class Finding:
    line: str  # "rank 3 never entered all_reduce #57 (the others wait in it)"; "" when nothing to say
    waited: Collective | None  # the collective the others wait in
    missing: tuple[int, ...]  # the ranks that never entered it
    ranks: dict[str, dict[str, Any]]  # rank -> its last entered and completed collective (in that group)


def waited_in(per_rank: Mapping[int, list[Collective]]) -> Collective | None:
    """The collective most ranks wait in (entered, not completed); among equals the newest. Sequence numbers
    count per group, so a group's only tell against another's is how many ranks wait in it."""
    pending = [c for found in per_rank.values() for c in found if not c.done]
    count = Counter((c.group, c.seq) for c in pending)
    return max(pending, key=lambda c: (count[c.group, c.seq], c.seq), default=None)


def summarise(dumps: Mapping[int, Dump | None]) -> Finding:
    """`dumps`: every rank of the attempt; None for a rank that wrote none (no heartbeat, not alive)."""
    per_rank = {r: entries(d) for r, d in dumps.items() if d is not None and not d.get("error")}
    absent = sorted(r for r in dumps if r not in per_rank)
    waited = waited_in(per_rank)
    group = waited.group if waited else None
    ranks = {str(r): rank_view(found, group) for r, found in sorted(per_rank.items())}
    if waited is None:
        line = "no rank waits in a collective" if per_rank else ""
        return Finding(with_absent(line, absent), None, (), ranks)
    newest = {r: last(found, waited.group) for r, found in per_rank.items()}
    missing = tuple(sorted(r for r, c in newest.items() if c is None or c.seq < waited.seq))
    inside = sorted(r for r, c in newest.items() if c is not None and c.seq == waited.seq and not c.done)
    return Finding(with_absent(line_of(waited, missing, inside, per_rank), absent), waited, missing, ranks)


def line_of(waited: Collective, missing: tuple[int, ...], inside: list[int], per_rank: Mapping[int, Any]) -> str:
    if not missing:
        return f"{names(inside)} wait in {waited} that every rank entered (none completed it)"
    others = sorted(set(per_rank) - set(missing))
    who = "the others wait" if inside == others else f"{names(inside)} wait"
    elsewhere = [f"rank {r} waits in {c}" for r in missing[:4] if (c := waited_in({r: per_rank[r]})) is not None]
    return "; ".join([f"{names(list(missing))} never entered {waited} ({who} in it)", *elsewhere])


def with_absent(line: str, absent: list[int]) -> str:
    if not absent:
        return line
    note = f"no flight-recorder dump from {names(absent)}"
    return f"{line}; {note}" if line else note


def names(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:8])) + (f" (+{len(ranks) - 8} more)" if len(ranks) > 8 else "")
    return f"rank {shown}" if len(ranks) == 1 else f"ranks {shown}"


def rank_view(found: list[Collective], group: str | None) -> dict[str, Any]:
    """A rank's last entered and last completed collective, in the waited-in group (else its newest group)."""
    if group is None:
        newest = max(found, key=lambda c: c.seq, default=None)
        group = newest.group if newest else ""
    entered, completed = last(found, group), last(found, group, done=True)
    return {
        "entered": entered.as_json() if entered else None,
        "completed": completed.as_json() if completed else None,
    }
