"""The job's state for `logs -f`, asked on a thread of its own: a scheduler that does not answer holds back the
state, never the lines (during a controller outage the follower printed nothing for 40 s while the rank files
grew, because each state query blocked the loop that reads them)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ddpctl.run.state import JobState

Answer = tuple[JobState | None, Exception | None]


class Asker:
    def __init__(self, query: Callable[[], JobState]) -> None:
        self.query = query
        self._done = threading.Event()
        self._answer: Answer | None = None
        self._busy = False

    def ask(self, wait_s: float) -> Answer | None:
        """Start a query unless one is still out; its answer if it comes within `wait_s` (the usual case, and
        then the follower behaves as if it asked itself), else None and the answer waits for `take`."""
        if not self._busy:
            self._busy = True
            self._done.clear()
            threading.Thread(target=self._run, name="ddpctl-logs-state", daemon=True).start()
        self._done.wait(wait_s)
        return self.take()

    def take(self) -> Answer | None:
        """The answer of the query that ended since the last take, once; None while it is still out."""
        if not self._done.is_set():
            return None
        answer, self._answer = self._answer, None
        self._done.clear()
        self._busy = False
        return answer

    def _run(self) -> None:
        try:
            self._answer = (self.query(), None)
        except Exception as err:  # handed to the follower, which reports a scheduler error and goes on
            self._answer = (None, err)
        self._done.set()
