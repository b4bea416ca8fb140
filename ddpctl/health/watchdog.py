"""The per-node health thread of `ddpctl launch`: hang watchdog, straggler and slowdown reports.

Every node's launcher runs one. It reads its own ranks' progress records and the other nodes' summaries of theirs
from the shared run dir (ddpctl.health.summary: per poll, its own ranks plus one file per node, and every record no
fresh summary covers), so each comes to the same verdict from the same records within a few polls. On a hang each
node has its own workers dump their stacks (they are the only processes it may signal); the first node to create the
attempt's hang.json then reads every rank's dump, records the `hang` event naming the ranks that stopped first and
where, and every node ends its torchrun. The ranks are also asked for their flight recorder's dump
(ddpctl.health.flightrec): the event says which collective the others wait in and which rank never entered it. The
attempt ends with cause `hang`: requeue.max_node_failures decides, and the next attempt resumes from the latest
complete checkpoint. Stragglers are reported by node 0 only, once per rank per attempt, and are never fatal.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpctl import safeio
from ddpctl.health import DUMP_SIGNAL, flightrec
from ddpctl.health.collectives import Finding, summarise
from ddpctl.health.hang import HangVerdict, check_hang
from ddpctl.health.records import placements
from ddpctl.health.slowdown import FACTOR, SlowdownRule
from ddpctl.health.stacks import DUMP_MARK, RankState, culprits, main_frames, node_findings, parse_dump, where
from ddpctl.health.straggler import find_stragglers
from ddpctl.health.summary import JobView
from ddpctl.health.workers import signal_worker
from ddpctl.run import history, notify
from ddpctl.run.history import Hung, SlowedDown, StragglerFlagged
from ddpctl.spec import HealthSettings

POLL_S = 1.0
VIEW_AGE_S = 0.9 * POLL_S  # the peer watch's look at the records, when this recent, serves the poll as well
DUMP_WAIT_S = 3.0  # for every node's workers to write their dumps to the shared filesystem
DUMP_TAIL_BYTES = 256 * 1024
RECORD_WAIT_S = 15.0  # how long the other nodes wait for the recording node before ending their torchrun
# A live rank's heartbeat rewrites its record at least every runtime.progress.PULSE_S (5 s), even while blocked
# in a collective; a record older than this means its process (or its whole node) stopped answering.
SILENT_S = 20.0


class Watchdog:
    def __init__(
        self, view: JobView, policy: HealthSettings, *, end_attempt: Callable[[], None], torchrun: int | None = None
    ) -> None:
        """`view` is the node's one view of the job's progress (shared with its peer watch), and where it sits;
        `torchrun` the pid of the launcher's torchrun: only its workers are ever signalled (health.workers)."""
        self.view, self.torchrun = view, torchrun
        self.layout, self.attempt, self.node, self.node_rank, _ = view.seat
        self.policy, self.end_attempt = policy, end_attempt
        self.started = time.time()
        self.hung = False
        self.found_at = 0.0  # when the hang was found (silences are measured to then)
        self._stop = threading.Event()
        self._flagged: set[int] = set()
        self._slowdowns = SlowdownRule()
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="ddpctl-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Called once torchrun exited; waits for a hang being handled to finish recording it."""
        self._stop.set()
        if self.hung:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                if self._poll():
                    return
            except Exception as err:  # a thread that dies leaves the job training unwatched: say it once, go on
                if not self._failed:
                    print(f"ddpctl watchdog [{self.node}]: a poll failed, watching on: {err!r:.200}", flush=True)
                self._failed = True

    def _poll(self) -> bool:
        """One look at the records; True once a hang was handled (the thread's work is done)."""
        records = self.view.records(VIEW_AGE_S)
        verdict = check_hang(time.time(), self.started, records, self.policy)
        if verdict is not None or self.layout.hang_marker(self.attempt).exists():
            self.hung = True
            self.on_hang(verdict, records)
            return True
        if self.node_rank == 0:
            self.report_stragglers(records)
            self.report_slowdowns(records, time.time())
        return False

    def report_slowdowns(self, records: dict[int, dict[str, Any]], now: float) -> None:
        """Beside the stragglers, by node 0 only: a node slow for minutes (health.slowdown), told and notified
        once per node and attempt; never fatal."""
        for found in self._slowdowns.look(now, records):
            event = SlowedDown(
                attempt=self.attempt,
                node=found.node,
                step_s=round(found.step_s, 4),
                baseline_s=None if found.baseline_s is None else round(found.baseline_s, 4),
                run_s=None if found.run_s is None else round(found.run_s, 4),
                versus=found.versus,
                factor=round(found.factor, 2),
                threshold=FACTOR,
                sustained_s=round(found.sustained_s),
            )
            history.append(self.layout.events, event)
            notify.on_event(self.layout, event)  # in the background, never raises

    def report_stragglers(self, records: dict[int, dict[str, Any]]) -> None:
        for found in find_stragglers(records, self.policy.straggler_factor, self.policy.straggler_steps):
            if found.rank not in self._flagged:
                self._flagged.add(found.rank)
                history.append(
                    self.layout.events,
                    StragglerFlagged(
                        attempt=self.attempt,
                        rank=found.rank,
                        node=found.node,
                        busy_s=round(found.busy_s, 4),
                        median_s=round(found.median_s, 4),
                        factor=round(found.factor, 2),
                        threshold=self.policy.straggler_factor,
                        steps=self.policy.straggler_steps,
                    ),
                )

    def on_hang(self, verdict: HangVerdict | None, records: dict[int, dict[str, Any]]) -> None:
        self.found_at = time.time()
        first = verdict is not None and self._claim(verdict)
        local = {
            rank: info for rank, info in placements(self.layout, self.attempt).items() if info.get("node") == self.node
        }
        why = (
            f"no rank progressed for {verdict.idle_s} s (allowed {verdict.allowed_s:g} s)"
            if verdict
            else "another node found the attempt hung"
        )
        flightrec.request(self.layout, self.attempt, why)  # the ranks' heartbeat threads answer within a second
        for rank, info in sorted(local.items()):
            dump_stacks(self.layout.rank_log(self.attempt, rank), info.get("pid"), self.torchrun, why)
        time.sleep(DUMP_WAIT_S)
        if first and verdict is not None:
            time.sleep(POLL_S)  # the other nodes notice hang.json up to a poll later
            self._record(verdict, records)
            self._mark_recorded()
        else:
            # The first node to end its torchrun makes srun (--kill-on-bad-exit) or the local supervisor stop the
            # others, SIGKILL following after KillWait: let the recording node finish first.
            deadline = time.monotonic() + RECORD_WAIT_S
            while time.monotonic() < deadline and not self._recorded():
                time.sleep(0.2)
        self.end_attempt()

    def _claim(self, verdict: HangVerdict) -> bool:
        """Only one node records the event: the one that creates hang.json."""
        try:
            fd = safeio.open_fd(self.layout.hang_marker(self.attempt), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            return False
        with os.fdopen(fd, "w") as out:
            json.dump({"t": time.time(), "node": self.node, "idle_s": verdict.idle_s}, out)
        return True

    def _recorded(self) -> bool:
        found = safeio.read_json(self.layout.hang_marker(self.attempt))
        return bool(found and found.get("recorded"))

    def _mark_recorded(self) -> None:
        marker = self.layout.hang_marker(self.attempt)
        safeio.write_text_atomic(marker, json.dumps({**(safeio.read_json(marker) or {}), "recorded": time.time()}))

    def _record(self, verdict: HangVerdict, records: dict[int, dict[str, Any]]) -> None:
        states = self._rank_states(records, self.found_at)
        first, found = culprits(states), self._collectives(states, records)
        if not any(s.silent_s is not None for s in first):  # a silent rank is the one the others wait for
            first = [s for s in states if s.rank in found.missing] or first  # the stacks show all ranks in torch
        hung = history.append(
            self.layout.events,
            Hung(
                attempt=self.attempt,
                idle_s=verdict.idle_s,
                timeout_s=verdict.allowed_s,
                allowance=verdict.why,
                culprits=tuple(
                    {"rank": s.rank, "node": s.node, "step": s.step, "where": where(list(s.frames))} for s in first
                ),
                ranks={str(s.rank): {"step": s.step, "where": where(list(s.frames))} for s in states},
                nodes=tuple(node_findings(states)),
                collective=found.line,
                collectives=found.ranks or None,
            ),
        )
        notify.on_event(self.layout, hung)  # in the background, never raises

    def _collectives(self, states: list[RankState], records: dict[int, dict[str, Any]]) -> Finding:
        """The flight recorders' summary. Bounded (flightrec.WAIT_S from the request, mostly spent in the stack
        dumps' wait already): only the live ranks with a heartbeat can answer, only they are waited for."""
        alive = [s.rank for s in states if s.silent_s is None and s.rank in records]
        try:
            return summarise(flightrec.collect(self.layout, self.attempt, [s.rank for s in states], alive))
        except Exception as err:  # the hang is recorded from the stacks all the same
            return Finding(f"flight recorder dumps unreadable: {err!r:.100}", None, (), {})

    def _rank_states(self, records: dict[int, dict[str, Any]], now: float) -> list[RankState]:
        """Each rank's step when the hang was found (the records the verdict came from: the stacks were dumped
        then), where its main thread is, and how long its heartbeat had been silent."""
        placed = placements(self.layout, self.attempt)
        states = []
        for rank in sorted(set(placed) | set(records)):
            raw = safeio.read_bounded(self.layout.rank_log(self.attempt, rank), DUMP_TAIL_BYTES, tail=True) or b""
            main = placed.get(rank, {}).get("main_thread")
            frames = main_frames(parse_dump(raw.decode(errors="replace")), main if isinstance(main, int) else None)
            record = records.get(rank, {})
            node = str(placed.get(rank, {}).get("node") or record.get("node", "?"))
            step = record.get("step")
            states.append(
                RankState(rank, node, step if isinstance(step, int) else None, tuple(frames), silence(record, now))
            )
        return states


def silence(record: dict[str, Any], now: float) -> float | None:
    """Seconds since the rank's heartbeat last wrote, when longer than SILENT_S (None: alive, done or unknown)."""
    written = record.get("written")
    if record.get("phase") == "done" or not isinstance(written, (int, float)):
        return None
    age = now - written
    return round(age, 1) if age > SILENT_S else None


def dump_stacks(log: Path, pid: Any, torchrun: int | None, why: str) -> None:
    """Mark the rank log, then have the worker (faulthandler) append every thread's stack below the mark; a pid
    that is not one of this launcher's torchrun's workers is never signalled (the file is the job's to write)."""
    if not signal_worker(pid, torchrun, 0):
        return  # gone already, or not ours
    try:
        fd = safeio.open_fd(log, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, f"{DUMP_MARK} {why}; stacks of all threads follow\n".encode())
        finally:
            os.close(fd)
    except OSError:
        return  # no log to dump into: a dump would go nowhere
    signal_worker(pid, torchrun, DUMP_SIGNAL)
