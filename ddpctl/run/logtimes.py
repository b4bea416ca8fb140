"""The `.times` sidecar of a rank log: when each part of the log was written (written by ddpctl.node.stamper).

One text line per write: `<end> <time>`: the log's bytes before offset <end> (and from the previous record's end)
were written at <time> (Unix seconds with microseconds). Appended, never rewritten, and the log itself stays
exactly what the rank printed. A log without a sidecar (written before ddpctl recorded times, or by another
writer) has no times: `ddpctl logs` shows it in file order, as it always did.
"""

from __future__ import annotations

import operator
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
    ends, times, used = parse_columns(data)
    return list(zip(ends, times, strict=True)), used


def parse_columns(data: bytes) -> tuple[list[int], list[float], int]:
    """`parse_times` as two lists (ends, times): no tuple per record for a follower of many busy ranks."""
    used = data.rfind(b"\n") + 1
    # A few records parse faster one by one: the whole-buffer checks cost as much as ~3 regex matches.
    fast = _parse_clean(data[:used]) if data.count(b"\n", 0, used) > 3 else None
    if fast is not None:
        return fast[0], fast[1], used
    records = _parse_each(data[:used])
    return [end for end, _ in records], [when for _, when in records], used


_DIGITS_DOT = b"0123456789."


def _parse_clean(body: bytes) -> tuple[list[int], list[float]] | None:
    """The records of `body` when every one is well formed and none runs backwards, parsed with whole-buffer
    operations instead of a regex per record (a follower of 512 busy ranks parses ~100k records a second);
    None where anything is unusual, for `_parse_each` to decide record by record."""
    count = body.count(b"\n")
    # Only digits and dots between the separators, which alternate " ", "\n"; one dot per record, none next to
    # a separator: each record is then `<end> <time>` with the dot inside <time>, unless int()/float() below
    # refuse a token.
    if not count or body.count(b".") != count or body.translate(None, _DIGITS_DOT) != b" \n" * count:
        return None
    if b" ." in body or b".\n" in body:
        return None
    tokens = body.replace(b"\n", b" ").split(b" ")  # <end>, <time>, ..., "" (after the last newline)
    try:
        ends = list(map(int, tokens[0:-1:2]))  # "" or a token with a dot: ValueError
        times = list(map(float, tokens[1::2]))  # two dots (so another has none): ValueError
    except ValueError:
        return None
    if len(times) != count or not all(map(operator.le, ends, ends[1:])):
        return None
    return ends, times


def _parse_each(body: bytes) -> list[tuple[int, float]]:
    out: list[tuple[int, float]] = []
    last = -1
    for line in body.splitlines(keepends=True):
        match = _RECORD.fullmatch(line)
        if match is None:
            continue
        end = int(match.group(1))
        if end >= last:
            out.append((end, float(match.group(2))))
            last = end
    return out
