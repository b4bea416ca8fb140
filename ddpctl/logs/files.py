"""File side of `ddpctl logs`: find attempts, rank logs and node names; read each log from where it left off.

An idle file costs one `os.stat` per poll. A file (and its `.times` sidecar) is opened when it first grows and
then kept open (pread on an open descriptor is ~15x cheaper than open/read/close, which matters at 100 polls/s),
but only within a budget of half the descriptor limit (stamps.FDS): past it, files are opened and closed per
read, so 1 024 ranks never run into a soft limit of 1 024.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from ddpctl import safeio
from ddpctl.logs.behind import Seen, count_lines, seen_by
from ddpctl.logs.core import LineFilter, LineSplitter, Source, decoded
from ddpctl.logs.stamps import FDS, Group, Stamps, Timed, TimedRaw, as_read, group
from ddpctl.run.layout import NODE_INFO_GLOB, RANK_INFO_GLOB, RunLayout, attempts_in, rank_of_log

_UNSEEN = -1  # inode before the first stat
_VANISHED = 0  # no file has inode 0: set when the file disappears, so its return reads from the start
_REPLACED = -1
_LINK = -2  # the path is a symlink: reported once, never read
CHUNK = 4 << 20  # most bytes read from one file per poll, so one chatty rank cannot starve the others


def list_attempts(root: Path) -> list[int]:
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return attempts_in(e.name for e in entries if e.is_dir())


def list_rank_logs(attempt_dir: Path) -> dict[int, Path]:
    try:
        entries = list(os.scandir(attempt_dir))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found = {rank_of_log(e.name): Path(e.path) for e in entries}
    return {rank: found[rank] for rank in sorted(r for r in found if r is not None)}


def read_node_info(path: Path) -> tuple[str, list[int]] | None:
    """(node name, global ranks) from a launcher's node-<k>.json or a worker's rank-<r>.json; None while it is
    missing or half-written."""
    try:
        info = json.loads(safeio.read_text(path))
        ranks = info["ranks"] if "ranks" in info else [info["rank"]]
        return str(info["node"]), [int(r) for r in ranks]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_node_map(attempt_dir: Path, skip: frozenset[str] = frozenset()) -> dict[str, dict[int, str]]:
    """Per info file name (except those in `skip`): global rank -> node name. Workers' rank-<r>.json come last
    so they override a launcher's node-<k>.json (which can only guess ranks under c10d rendezvous)."""
    found: dict[str, dict[int, str]] = {}
    for path in [*sorted(attempt_dir.glob(NODE_INFO_GLOB)), *sorted(attempt_dir.glob(RANK_INFO_GLOB))]:
        info = None if path.name in skip else read_node_info(path)
        if info is not None:
            found[path.name] = dict.fromkeys(info[1], info[0])
    return found


def world_size(rank_logs: dict[int, Path], nodes: dict[int, str]) -> int:
    """One more than the highest rank any file names; 0 while nothing is known."""
    return max([*rank_logs, *nodes], default=-1) + 1


def mtime_of(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


class FileTail:
    """One log file read incrementally: `poll` returns its new complete lines, or None if it did not grow.

    A file that shrank (truncated), was replaced (new inode) or came back after vanishing (the inode number may
    be reused at once) is read again from the start, after flushing the old content's partial line.
    """

    def __init__(self, path: Path, source: Source, chunk: int = CHUNK) -> None:
        self.path = str(path)
        self.source = source
        self.offset = 0
        self.chunk = chunk
        # The writers are gone: read past the last write time recorded too (see stamps.Stamps).
        self.final = False
        self.stamps = Stamps(self.path)
        self.size_seen = 0
        self._inode = _UNSEEN
        self._splitter = LineSplitter()
        self._fd: int | None = None
        self.behind = False  # the last poll left bytes it could have read (past its chunk)
        self.seen: list[Seen] = []  # (size, first, last seen so) from the offset on (ddpctl.logs.behind)
        self._seen_last: float | None = None
        self.skipped = (0, 0)  # lines and bytes the last poll skipped

    @property
    def has_partial(self) -> bool:
        return self._splitter.has_partial

    @property
    def unread(self) -> bool:
        """Bytes the last poll saw but did not read: past one chunk, or not timed yet (see `final`)."""
        return self.size_seen > self.offset

    def poll(self) -> list[str] | None:
        """New complete lines in file order, or None if the file did not grow."""
        groups = self.poll_groups()
        return None if groups is None else [line for _, lines in groups for line in lines]

    def poll_groups(self) -> list[Group] | None:
        """New complete lines grouped by their write time (None for a log without times), or None if the file
        did not grow (or only by bytes whose write time is not recorded yet)."""
        timed = self.poll_timed()
        return None if timed is None else group(*timed)

    def poll_timed(self) -> Timed | None:
        """New complete lines, each with its write time (None for a log without times), or None as `poll_groups`."""
        timed = self.poll_raw()
        if timed is None:
            return None
        return timed[0], decoded(timed[1])

    def poll_raw(
        self, chunk: int | None = None, seen: float | None = None, cutoff: float | None = None
    ) -> TimedRaw | None:
        """`poll_timed` with the lines as read (bytes): a follower writes them without decoding them; `chunk`:
        the most bytes to read this time, if not `self.chunk`; `seen`: the time of this pass, noted with the size;
        `cutoff`: skip the bytes seen by then (`skipped`: what was)."""
        self.skipped = (0, 0)
        try:
            st = os.lstat(self.path)  # a str path: no Path object per file per poll
        except FileNotFoundError:
            if self._inode != _UNSEEN:
                self._inode = _VANISHED
                self.close()
            return None
        if stat.S_ISLNK(st.st_mode):
            return self._refuse_link()
        restarted: list[bytes] = []
        last = self.stamps.last
        if st.st_size < self.offset or self._inode not in (st.st_ino, _UNSEEN):
            restarted = self._splitter.flush_raw()
            self.offset = 0
            self.stamps.reset()
            self.close()
            self.seen, self._seen_last = [], None
        self._inode = st.st_ino
        self.size_seen = st.st_size
        # Skip first, so the records of what is skipped are passed over, not parsed (Stamps.refresh).
        self._keep_up(st.st_size, seen, cutoff)
        limit = self.stamps.refresh(st.st_size, self.offset)
        if limit is None or self.final:
            limit = st.st_size
        if limit <= self.offset:
            return ([last] * len(restarted), restarted) if restarted else None
        try:
            data = self._read_lines(st.st_ino, chunk or self.chunk, limit)
        except OSError as err:
            if err.errno == errno.ELOOP:  # swapped for a symlink since the lstat
                return self._refuse_link()
            raise
        start, self.offset = self.offset, self.offset + len(data)
        self.behind = limit > self.offset
        splitter = self._splitter
        times, lines = self.stamps.split_timed(start, data, splitter.has_partial, splitter.feed_raw, as_read)
        if restarted:
            return [last] * len(restarted) + times, restarted + lines
        return times, lines

    def _keep_up(self, size: int, when: float | None, cutoff: float | None) -> None:
        """Note the size a pass at `when` saw; skip the bytes seen by `cutoff` (ddpctl.logs.behind)."""
        if when is not None:  # what the file held when first seen: all of it seen then
            seen = self.seen = self.seen or [(0, when, when)]
            if size > seen[-1][0]:  # the size before was last seen at the pass before: what came, came since
                seen[-1] = (*seen[-1][:2], self._seen_last or when)
                seen.append((size, when, when))
            self._seen_last = when  # a float, not a tuple per file and pass: 1 024 idle files are polled too
        if cutoff is None or size <= self.offset:
            return
        while len(self.seen) > 1 and self.seen[1][0] <= self.offset:  # one point at or before the offset is enough
            del self.seen[0]
        if (target := min(size, seen_by(self.seen, cutoff))) > self.offset:
            self.skip(target)  # seen by `cutoff` and still not shown

    def skip(self, limit: int) -> None:  # the bytes before `limit`, up to the last whole line among them
        lines, end = count_lines(lambda at, size: self._read(self._inode, size, at), self.offset, limit)
        if end > self.offset:  # the line the splitter holds the start of is skipped too
            self.skipped = (lines, end - self.offset + sum(map(len, self._splitter.flush_raw())))
            self.offset = end
            self.stamps.skip(end)

    def flush(self) -> list[str]:
        return self._splitter.flush()

    def flush_raw(self) -> list[bytes]:
        return self._splitter.flush_raw()

    def _refuse_link(self) -> TimedRaw | None:
        """A symlinked rank log is not followed (it could point at any file the reader may read): say so once."""
        if self._inode == _LINK:
            return None
        self._inode = _LINK
        self.close()
        name = Path(self.path).name
        note = f"[ddpctl] not shown: {name} is a symbolic link (run-dir files are never followed)"
        return [None], [note.encode("utf-8", "replace")]

    def close(self) -> None:
        self.stamps.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            FDS.give()

    def _read_lines(self, inode: int, chunk: int, limit: int) -> bytes:
        """Up to `chunk` bytes from the offset towards `limit`; a read cut by `chunk` ends at its last whole line,
        the rest comes next time (a partial line would send every later read of the file down Stamps' record by
        record path)."""
        data = self._read(inode, min(chunk, limit - self.offset))
        if len(data) < limit - self.offset and (cut := data.rfind(b"\n") + 1):
            return data[:cut]
        return data

    def _read(self, inode: int, size: int, at: int | None = None) -> bytes:
        at = self.offset if at is None else at
        try:
            fd = self._open(inode)
            if fd == _REPLACED:
                return b""
            if fd is not None:
                return os.pread(fd, size, at)
            fd = safeio.open_read(self.path)  # over the descriptor budget: open, read, close
            try:
                return os.pread(fd, size, at)
            finally:
                os.close(fd)
        except FileNotFoundError:
            return b""

    def _open(self, inode: int) -> int | None:
        """The kept descriptor (opened now if the budget allows), None past the budget, or _REPLACED."""
        if self._fd is None and FDS.take():
            try:
                self._fd = safeio.open_read(self.path)  # a symlinked rank log is refused, never followed
            except OSError:
                FDS.give()
                raise
            if os.fstat(self._fd).st_ino != inode:  # replaced since the stat: the next poll starts over
                self.close()
                return _REPLACED
        return self._fd


@dataclass
class AttemptFiles:
    """The rank logs of one attempt that pass the rank/node filter, in rank order."""

    layout: RunLayout
    attempt: int
    flt: LineFilter
    chunk: int = CHUNK
    tails: dict[int, FileTail] = field(default_factory=dict)
    behind: bool = False  # the last pass left bytes it could have read (ddpctl.logs.follow.poll_files)
    nodes: dict[int, str] = field(default_factory=dict)
    _node_files: set[str] = field(default_factory=set)

    @property
    def path(self) -> Path:
        return self.layout.attempt_dir(self.attempt)

    def rescan(self) -> None:
        """Pick up rank files and node infos that appeared since the last scan."""
        for name, ranks in read_node_map(self.path, frozenset(self._node_files)).items():
            self._node_files.add(name)
            self.nodes.update(ranks)
        added = False
        for rank, path in list_rank_logs(self.path).items():
            node = self.nodes.get(rank)
            tail = self.tails.get(rank)
            if tail is None and self.flt.wants(rank, node):
                self.tails[rank] = FileTail(path, Source(self.attempt, node, rank), self.chunk)
                added = True
            elif tail is not None and tail.source.node is None and node is not None:
                tail.source = replace(tail.source, node=node)
        if added:
            self.tails = dict(sorted(self.tails.items()))

    def close(self) -> None:
        for tail in self.tails.values():
            tail.close()
