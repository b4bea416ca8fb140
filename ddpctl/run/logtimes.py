"""The `.times` sidecar of a rank log: when each part of the log was written (written by ddpctl.node.stamper).

One text line per write: `<end> <time>`: the log's bytes before offset <end> (and from the previous record's end)
were written at <time> (Unix seconds with microseconds). Appended, never rewritten, and the log itself stays
exactly what the rank printed. A log without a sidecar (written before ddpctl recorded times, or by another
writer) has no times: `ddpctl logs` shows it in file order, as it always did.
"""

from __future__ import annotations

import re
from pathlib import Path

SUFFIX = ".times"
_RECORD = re.compile(rb"(\d+) (\d+\.\d+)\n")


def times_of(log: Path | str) -> str:
    """`rank-3.log` -> `rank-3.times`, beside it."""
    text = str(log)
    return (text[: -len(".log")] if text.endswith(".log") else text) + SUFFIX


def record(end: int, when: float) -> bytes:
    return b"%d %.6f\n" % (end, when)


def parse_times(data: bytes) -> tuple[list[tuple[int, float]], int]:
    """Whole records in `data` and how many bytes they took (a torn last record waits for the rest).

    A damaged record (not `<digits> <digits>.<digits>`) is skipped; records must not run backwards (a log
    rewritten under the same name restarts its sidecar with it), so one that does is dropped as well.
    """
    out: list[tuple[int, float]] = []
    used = data.rfind(b"\n") + 1
    last = -1
    for line in data[:used].splitlines(keepends=True):
        match = _RECORD.fullmatch(line)
        if match is None:
            continue
        end = int(match.group(1))
        if end >= last:
            out.append((end, float(match.group(2))))
            last = end
    return out, used
