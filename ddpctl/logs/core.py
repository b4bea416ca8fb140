"""Pure core of `ddpctl logs`: flag parsing, line splitting, prefixes and filters. No I/O here.

Lines are split on b"\\n" *before* decoding: the newline byte never occurs inside a UTF-8 multi-byte sequence,
so a complete line always decodes whole, and a partial last line stays as bytes until its newline arrives.
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddpctl.errors import LogsError

ALL = "all"
# A line with no newline after this many bytes (e.g. a progress bar redrawn with \r forever) is emitted
# anyway: holding it without bound would let one rank grow the follower's memory without limit.
MAX_PENDING = 1 << 20
_RANK_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")
_MAX_RANK = 1 << 20


@dataclass(frozen=True)
class Source:
    """Where a line came from: attempt, node name (None until its launcher wrote it) and global rank."""

    attempt: int
    node: str | None
    rank: int

    @property
    def prefix(self) -> str:
        return f"[a{self.attempt} {self.node or '?'} r{self.rank}] "


def parse_rank_spec(spec: str) -> frozenset[int]:
    """`0,3-5` -> {0, 3, 4, 5}."""
    ranks: set[int] = set()
    for raw in spec.split(","):
        item = raw.strip()
        match = _RANK_ITEM.match(item)
        if not match:
            raise LogsError(
                f"--rank {spec!r}: bad item {item!r}; allowed: ranks and ranges separated by commas, e.g. 0,3-5"
            )
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if high < low:
            raise LogsError(f"--rank {spec!r}: range {item!r} runs backwards; allowed: LOW-HIGH, e.g. {high}-{low}")
        if high > _MAX_RANK:
            raise LogsError(f"--rank {spec!r}: rank {high} is too large; allowed: 0-{_MAX_RANK}")
        ranks.update(range(low, high + 1))
    return frozenset(ranks)


def check_ranks(ranks: frozenset[int] | None, world: int) -> None:
    """Every requested rank must exist; `world` 0 means not known yet (no rank file or node info so far)."""
    if not ranks or world <= 0:
        return
    outside = sorted(r for r in ranks if r >= world)
    if outside:
        raise LogsError(f"--rank: rank {outside[0]} is outside the job's world size {world}; allowed: 0-{world - 1}")


def parse_nodes(spec: str) -> frozenset[str]:
    names = frozenset(n.strip() for n in spec.split(",") if n.strip())
    if not names:
        raise LogsError(f"--node {spec!r}: no node name; allowed: node names separated by commas, e.g. node2")
    return names


def check_nodes(nodes: frozenset[str] | None, known: Iterable[str]) -> None:
    """Every requested node must be one the job ran on (skipped while no node info exists yet)."""
    known_names = sorted(set(known))
    if not nodes or not known_names:
        return
    for name in sorted(nodes - set(known_names)):
        close = difflib.get_close_matches(name, known_names, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise LogsError(f"--node: no node {name!r} in this job{hint}; allowed: {', '.join(known_names)}")


def parse_attempt(spec: str | None) -> int | str | None:
    """None (latest), `all`, or an attempt number."""
    if spec is None or spec == ALL:
        return spec
    if not spec.isdigit():
        raise LogsError(f"--attempt {spec!r}: not a number; allowed: an attempt number (0, 1, ...) or 'all'")
    return int(spec)


def select_attempts(choice: int | str | None, available: list[int]) -> list[int]:
    """The attempts to show, oldest first; [] when the job has not started an attempt yet."""
    if choice is None:
        return available[-1:]
    if choice == ALL:
        return list(available)
    if choice not in available:
        allowed = ", ".join(map(str, available)) or "none yet"
        raise LogsError(f"--attempt {choice}: this job has no such attempt; allowed: {allowed} or 'all'")
    return [int(choice)]


def compile_grep(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as err:
        raise LogsError(
            f"--grep {pattern!r}: not a valid regular expression ({err}); allowed: Python re syntax"
        ) from None


@dataclass(frozen=True)
class LineFilter:
    ranks: frozenset[int] | None = None
    nodes: frozenset[str] | None = None
    grep: re.Pattern[str] | None = None

    def wants(self, rank: int, node: str | None) -> bool:
        """Whether to read this rank's file; with --node, a rank whose node is not known yet waits."""
        if self.ranks is not None and rank not in self.ranks:
            return False
        return self.nodes is None or node in self.nodes

    def select(self, lines: list[str]) -> list[str]:
        if self.grep is None:
            return lines
        search = self.grep.search
        return [line for line in lines if search(line)]


class LineSplitter:
    """Bytes in, complete lines out; the partial last line waits for its newline (or `flush`). `feed` decodes
    them; `feed_raw` leaves them as bytes, for a follower that writes bytes (decoding each line as `feed` would
    gives the same text: a newline byte never occurs inside a UTF-8 sequence)."""

    def __init__(self) -> None:
        self._pending = b""

    @property
    def has_partial(self) -> bool:
        return bool(self._pending)

    def feed(self, data: bytes) -> list[str]:
        whole = self._whole(data)
        if whole is None:
            return self.flush() if len(self._pending) > MAX_PENDING else []
        lines = whole.decode("utf-8", "replace").split("\n")
        if len(self._pending) > MAX_PENDING:
            lines.extend(self.flush())
        return lines

    def feed_raw(self, data: bytes) -> list[bytes]:
        whole = self._whole(data)
        if whole is None:
            return self.flush_raw() if len(self._pending) > MAX_PENDING else []
        lines = whole.split(b"\n")
        if len(self._pending) > MAX_PENDING:
            lines.extend(self.flush_raw())
        return lines

    def _whole(self, data: bytes) -> bytes | None:
        """The complete lines of what is pending plus `data`, without their last newline; None if there are none."""
        buf = self._pending + data if self._pending else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self._pending = buf
            return None
        self._pending = buf[cut + 1 :]
        return buf[:cut]

    def flush(self) -> list[str]:
        """The partial last line, if any (the writer is gone: the job ended or the file was truncated)."""
        return [line.decode("utf-8", "replace") for line in self.flush_raw()]

    def flush_raw(self) -> list[bytes]:
        pending, self._pending = self._pending, b""
        return [pending] if pending else []


def decoded(lines: Sequence[bytes]) -> list[str]:
    """Lines kept as bytes (`LineSplitter.feed_raw`), as `feed` would have decoded them: one decode for them all,
    which gives the same text as one per line (a newline never occurs inside a UTF-8 sequence)."""
    return b"\n".join(lines).decode("utf-8", "replace").split("\n") if lines else []


def render_plain(prefix: str, lines: list[str]) -> str:
    """`prefix` before each line, one newline after each: one join instead of a format per line."""
    if not lines:
        return ""
    return prefix + ("\n" + prefix).join(lines) + "\n"


def render_json(source: Source, lines: list[str], when: float | None = None, timestamps: bool = False) -> str:
    head: dict[str, object] = {"attempt": source.attempt, "node": source.node, "rank": source.rank}
    if timestamps:
        head["time"] = when or None
    return "".join(json.dumps({**head, "text": line}) + "\n" for line in lines)


_second: list[tuple[int, str]] = [(-1, "")]  # the last second formatted: a poll's lines mostly share it


def format_time(when: float | None) -> str:
    """A line's write time for --timestamps: UTC, ISO 8601 to the millisecond, as `docker logs -t` does;
    `-` where the log has no times (written before ddpctl recorded them)."""
    if not when:
        return "-"
    second = int(when)
    if _second[0][0] != second:
        _second[0] = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_second[0][1]}.{int((when - second) * 1000):03d}Z"


def attempt_banner(attempt: int) -> str:
    return f"-- attempt {attempt} --"


def end_banner(job_id: str, state: str) -> str:
    return f"-- job {job_id} {state} --"
