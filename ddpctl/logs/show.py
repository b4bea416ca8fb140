"""`ddpctl logs`: find, merge, filter and follow a job's per-rank logs.

Pieces: `core` (pure: flags, line splitting, prefixes, filters), `failures` (pure: error detection),
`files` (reading files incrementally), `output` (plain/colour/JSON sinks), `follow` (the -f loop).

Job state: a record whose `final_state` is a terminal state is taken at its word (no backend query); otherwise
the injected `state_fn` (default `ddpctl.backends.current_state`) is asked. The CLI's `state_fn` re-reads the
registry each time and takes any `final_state` found there at its word (see `job_state`), so a final state
recorded while -f runs ends it without a scheduler query. The state decides whether partial last lines may be
printed (only once the job is terminal: until then the writer may still finish the line) and when -f stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ddpctl import safeio
from ddpctl.backends import current_state
from ddpctl.health.report import describe_event
from ddpctl.logs.core import ALL, LineFilter, Source, attempt_banner, check_nodes, check_ranks, select_attempts
from ddpctl.logs.failures import ErrorScanner, RankFailure, order_failures, root_cause_note, with_launcher_reports
from ddpctl.logs.files import (
    AttemptFiles,
    FileTail,
    list_attempts,
    list_rank_logs,
    mtime_of,
    read_node_map,
    world_size,
)
from ddpctl.logs.follow import FollowConfig, Follower
from ddpctl.logs.merge import DUMP_CHUNK, file_groups, merged
from ddpctl.logs.output import Sink
from ddpctl.node.torchreport import LauncherFailure, launcher_failures, oom_limit
from ddpctl.run import history
from ddpctl.run.history import CheckpointRotated, Decided, HealthEvent, OomKilled, RunHistory, ScratchRestart
from ddpctl.run.layout import NODE_LOG_GLOB, RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import TERMINAL, JobState, StateFn
from ddpctl.run.stoptruth import run_summary
from ddpctl.sanitize import visible

LAUNCHER_TAIL_BYTES = 1 << 20  # torchrun's failure report is at the end of a launcher log


@dataclass(frozen=True)
class LogsRequest:
    follow: bool = False
    attempt: int | str | None = None  # None: the latest; "all"; or one attempt number
    flt: LineFilter = field(default_factory=LineFilter)
    errors: bool = False


def job_state(record: JobRecord, state_fn: StateFn = current_state) -> JobState:
    """The record's `final_state` if set (no backend query), else what `state_fn` says."""
    if record.final_state:
        return JobState(record.final_state)
    return state_fn(record)


def show_logs(
    record: JobRecord,
    request: LogsRequest,
    sink: Sink,
    state_fn: StateFn = current_state,
    config: FollowConfig | None = None,
) -> JobState | None:
    """Print the job's logs as requested; with `follow`, returns the terminal state the job reached."""
    layout = RunLayout(Path(record.run_dir))
    available = list_attempts(layout.root)
    selected = select_attempts(request.attempt, available)
    check_filters(layout, selected, request.flt)
    if not selected and not request.follow:
        sink.note(f"-- job {record.job_id}: no attempt has started yet (no attempt-N in {layout.root}) --")
        sink.flush()
        return None
    if request.errors:
        show_errors(layout, selected, request.flt, sink)
        return None

    def query() -> JobState:
        # A terminal state never changes, so even this snapshot of the record is still right.
        return JobState(str(record.final_state)) if record.final_state in TERMINAL else state_fn(record)

    if not request.follow:
        dump(layout, selected, request, sink, lambda: query().terminal)
        return None
    return follow(record, layout, selected, request, sink, query=query, config=config)


def follow(
    record: JobRecord,
    layout: RunLayout,
    selected: list[int],
    request: LogsRequest,
    sink: Sink,
    *,
    query: Callable[[], JobState],
    config: FollowConfig | None,
) -> JobState:
    """-f: older selected attempts dumped whole, then the newest followed (and the ones after it) to the end."""
    if request.attempt == ALL and selected:
        dump(layout, selected[:-1], request, sink, lambda: True)
        sink.note(attempt_banner(selected[-1]))
    follower = Follower(
        layout,
        record.job_id,
        request.flt,
        sink,
        query,
        attempt=selected[-1] if selected else None,
        pinned=isinstance(request.attempt, int),
        config=config,
    )
    return follower.run()


def check_filters(layout: RunLayout, attempts: list[int], flt: LineFilter) -> None:
    """--rank and --node must name ranks and nodes the job has (as far as its files tell so far)."""
    world, names = 0, set[str]()
    for attempt in attempts:
        path = layout.attempt_dir(attempt)
        nodes = {rank: name for found in read_node_map(path).values() for rank, name in found.items()}
        world = max(world, world_size(list_rank_logs(path), nodes))
        names.update(nodes.values())
    check_ranks(flt.ranks, world)
    check_nodes(flt.nodes, names)


def dump(
    layout: RunLayout, attempts: list[int], request: LogsRequest, sink: Sink, terminal: Callable[[], bool]
) -> None:
    """All written so far, every attempt's ranks merged in the order their lines were written; a partial last
    line only where its writer is gone (older attempt, job ended).

    The job state is asked for only if some file of the newest attempt ends without a newline (or with bytes
    whose write time is not recorded yet).
    """
    newest = max(list_attempts(layout.root), default=-1)
    for attempt in attempts:
        if request.attempt == ALL:
            sink.note(attempt_banner(attempt))
        files = AttemptFiles(layout, attempt, request.flt, chunk=DUMP_CHUNK)
        files.rescan()
        final = Once(terminal) if attempt == newest else Once(lambda: True)
        streams = [file_groups(tail, request.flt, final) for tail in files.tails.values()]
        for count, (when, source, lines) in enumerate(merged(streams)):
            sink.lines(source, lines, when)
            if count % 64 == 63:
                sink.flush()
        sink.flush()
    sink.flush()


class Once:
    """A boolean query asked at most once."""

    def __init__(self, query: Callable[[], bool]) -> None:
        self._query = query
        self._answer: bool | None = None

    def __call__(self) -> bool:
        if self._answer is None:
            self._answer = self._query()
        return self._answer


def show_errors(layout: RunLayout, attempts: list[int], flt: LineFilter, sink: Sink) -> None:
    """Per attempt: each rank's first error, most likely root cause first, then a line naming it."""
    past = history.load(layout.events)
    for attempt in attempts:
        failures, events, scanned = attempt_failures(layout, attempt, flt, past)
        for failure in order_failures(failures):
            sink.failure(failure.source, failure.hit)
        for event in events:  # the watchdog's findings (a hang explains a run with no error), OOM kills
            sink.note(f"-- {describe_event(event)} --")
        sink.note(root_cause_note(failures, attempt, scanned))
        if (decided := past.attempt(attempt).decision) is not None and (said := decided_cause(decided)):
            sink.note(said)
        sink.flush()
    # A stop nobody acted on is the likeliest reason for lost work, and no rank's log says so.
    stops, _ = run_summary(layout, time.time(), past)
    for stop in stops:
        if stop.state == "unacknowledged" and stop.attempt in attempts:
            sink.note(stop.text)
    for attempt in attempts:  # a script of a known kind that trained from scratch although a checkpoint was there
        if (scratch := past.attempt(attempt).first(ScratchRestart)) is not None:
            sink.note(visible(scratch.text()))
        if (rotated := past.attempt(attempt).first(CheckpointRotated)) is not None:
            sink.note(visible(rotated.text()))
    sink.flush()


def decided_cause(decided: Decided) -> str | None:
    """The attempt's cause as its decision recorded it: the headline, over any rank log's collateral error."""
    text = decided.cause_text()
    if text is None or decided.cause == "stop":
        return None
    return f"-- attempt {decided.attempt} ended by {text[:400]} (recorded by its decision: {decided.action}) --"


def attempt_failures(
    layout: RunLayout, attempt: int, flt: LineFilter, past: RunHistory
) -> tuple[list[RankFailure], list[HealthEvent], int]:
    """Each failed rank's first error in the attempt (unordered), its health events, and how many rank logs."""
    files = AttemptFiles(layout, attempt, flt)
    files.rescan()
    own = {f.source.rank: f for f in map(first_failure, files.tails.values()) if f is not None}
    events = past.health(attempt)
    ooms = {e.node: e for e in events if isinstance(e, OomKilled)}
    return with_launcher_reports(own, launcher_reports(files, flt, ooms)), events, len(files.tails)


def launcher_reports(
    files: AttemptFiles, flt: LineFilter, ooms: dict[str, OomKilled] | None = None
) -> list[tuple[Source, LauncherFailure, str, float]]:
    """What every node's launcher log of the attempt reports about failed ranks (within the filter); a SIGKILL
    on a node whose launcher recorded an OOM kill (`ooms`, by node name) is reported as out of memory."""
    out = []
    for path in sorted(files.path.glob(NODE_LOG_GLOB)):
        try:
            text, before = safeio.read_tail(path, LAUNCHER_TAIL_BYTES)
        except OSError:  # vanished, or a symlink (never followed)
            continue
        name = path.name if before is not None else f"{path.name} (last MiB)"
        for report in launcher_failures(text.splitlines()):
            node = files.nodes.get(report.rank)
            if flt.wants(report.rank, node):
                oom = (ooms or {}).get(node) if node is not None else None
                placed = replace(
                    report,
                    line_no=report.line_no + (before or 0),
                    oom_limit=oom_limit(oom) if oom is not None and report.exitcode == -9 else None,
                )
                out.append((Source(files.attempt, node, report.rank), placed, name, mtime_of(path)))
    return out


def first_failure(tail: FileTail) -> RankFailure | None:
    scanner = ErrorScanner()
    tail.final = True  # bytes whose write time is not recorded yet count too
    while (lines := tail.poll()) is not None:
        if any(scanner.feed(line) for line in lines):
            break
    else:
        for line in tail.flush():
            scanner.feed(line)
    tail.close()
    hit = scanner.finish()
    return RankFailure(tail.source, hit, mtime_of(Path(tail.path))) if hit else None
