"""Pure error detection for `ddpctl logs --errors`: each rank's first error, and which rank failed first.

"First" is decided from what the files can tell (documented in `order_failures`):
  1. real errors before collateral ones: when one rank dies, every other rank's next collective fails with an
     NCCL/Gloo/ProcessGroup error ("Connection closed by peer", "NCCL communicator was aborted", watchdog
     timeouts, torchrun's SIGTERM to the survivors). Those are consequences, so a rank with any other error is
     preferred;
  2. then the earliest time the rank's log was last written (file mtime): a failing worker prints its
     traceback and exits, so its file stops growing when it fails, while the collateral ranks keep going until
     their collective times out or torchrun tears them down;
  3. then the lowest attempt and rank, so the answer is stable.
A rank killed by a signal leaves no error in its own log: its launcher's report (node-<k>.log, see
`ddpctl.node.torchreport`) names it, with the time torchrun noticed, and `with_launcher_reports` counts that as
the rank's own, real failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpctl.logs.core import Source
from ddpctl.node.torchreport import LauncherFailure, is_collateral

_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
# torchrun can prefix every worker line with its rank ("[rank3]: ..."); strip it before matching.
_RANK_TAG = re.compile(r"^\[(?:default)?rank\d+\]:\s?")
_ERROR = re.compile(
    r"\b[\w.]*(?:Error|Exception):"  # RuntimeError: ..., Error: ..., torch.distributed.DistBackendError:
    r"|^[\w.]*(?:Error|Exception)\s*$"  # a bare exception name on its own line
    r"|CUDA error|\bKilled\b|Segmentation fault|core dumped|Fatal Python error|\bERROR\b"
    r"|^\[E[ \d]|Watchdog caught collective operation timeout"  # c10 error log: "[E ProcessGroupNCCL.cpp:1]"
)


_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
# Frames that are nobody's code of their own: the interpreter's, installed packages' and ddpctl's worker wrapper.
_NOT_USERS = re.compile(r"^<|/lib/python\d[\d.]*/|/site-packages/|/dist-packages/|/ddpctl/node/worker\.py$")


@dataclass(frozen=True)
class ErrorHit:
    line_no: int  # 1-based: the error line, or a traceback's "Traceback ..." header
    text: str  # the error line; for a traceback its exception line ("RuntimeError: ...")
    collateral: bool
    file: str | None = None  # None: the rank's own log; else the launcher log that told (node-<k>.log)
    frame: str | None = None  # a traceback's innermost frame in the user's code: "train.py:58 in main"

    @property
    def where(self) -> str:
        if self.frame:
            return f"{self.frame} (rank log line {self.line_no})"
        return f"{self.file} line {self.line_no}" if self.file else f"line {self.line_no}"


def users_frame(path: str, line: str, func: str) -> str | None:
    """`train.py:58 in main` for a frame of the user's code; None for the interpreter's or a package's (pure)."""
    if _NOT_USERS.search(path):
        return None
    return f"{path.rsplit('/', 1)[-1]}:{line} in {func}"


class ErrorScanner:
    """Feed one rank's lines in order; `hit` is its first error once `feed` returned True, or after finish."""

    def __init__(self) -> None:
        self.hit: ErrorHit | None = None
        self._line_no = 0
        self._traceback_at = 0
        self._frame: str | None = None  # the innermost user frame of the traceback so far

    def feed(self, line: str) -> bool:
        self._line_no += 1
        text = _RANK_TAG.sub("", line, count=1).rstrip("\r")
        if self._traceback_at:
            # Frames and source lines are indented; the first flush-left line is the exception.
            if not text.strip() or text[0].isspace():
                if (match := _FRAME.match(text)) is not None:
                    self._frame = users_frame(match["path"], match["line"], match["func"]) or self._frame
                return False
            self._record(self._traceback_at, text)
            return True
        if _TRACEBACK.match(text):
            self._traceback_at = self._line_no
            return False
        if _ERROR.search(text):
            self._record(self._line_no, text)
            return True
        return False

    def finish(self) -> ErrorHit | None:
        """A traceback cut off before its exception line (the worker was killed mid-write) still counts."""
        if self.hit is None and self._traceback_at:
            self._record(self._traceback_at, "Traceback (most recent call last): (cut off)")
        return self.hit

    def _record(self, line_no: int, text: str) -> None:
        self.hit = ErrorHit(line_no, text.strip(), is_collateral(text), frame=self._frame)


def first_error(lines: list[str]) -> ErrorHit | None:
    scanner = ErrorScanner()
    for line in lines:
        if scanner.feed(line):
            break
    return scanner.finish()


@dataclass(frozen=True)
class RankFailure:
    source: Source
    hit: ErrorHit
    mtime: float  # when the rank's log was last written


def order_failures(failures: list[RankFailure]) -> list[RankFailure]:
    """Most likely root cause first (see the module docstring for the heuristic)."""
    return sorted(failures, key=lambda f: (f.hit.collateral, f.mtime, f.source.attempt, f.source.rank))


def root_cause_note(failures: list[RankFailure], attempt: int, scanned: int) -> str:
    if not failures:
        return f"-- no errors found in attempt {attempt} ({scanned} rank logs) --"
    first = order_failures(failures)[0]
    why = "earliest NCCL/Gloo error; no other kind" if first.hit.collateral else "earliest non-NCCL error"
    where = f"rank {first.source.rank} on {first.source.node or '?'}, {first.hit.where}"
    return (
        f"-- first failure in attempt {attempt}: {where}"
        f" ({why}, {len(failures)} of {scanned} ranks failed): {first.hit.text} --"
    )


def with_launcher_reports(
    found: dict[int, RankFailure],
    reports: list[tuple[Source, LauncherFailure, str, float]],
) -> list[RankFailure]:
    """Each rank's failure from its own log and its launcher's report (source, failure, log name, fallback
    time): the rank log's real error wins (it has the detail), then a death the launcher saw (a signal, or
    an exit status with nothing in the rank log), then the rank log's collateral error."""
    merged = dict(found)
    for source, report, log_name, fallback in reports:
        own = found.get(source.rank)
        if own is not None and (not own.hit.collateral or report.exitcode > 0 or report.collateral):
            continue
        hit = ErrorHit(report.line_no, report.text, report.collateral, file=log_name)
        merged[source.rank] = RankFailure(source, hit, report.when if report.when is not None else fallback)
    return list(merged.values())
