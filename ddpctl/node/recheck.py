"""A node's checks while training runs (spec `health.node_check_every_min`): a background thread of `ddpctl launch`.

Every N minutes, counted from torchrun's start and then from the previous check's end (checks never overlap, and a
slow one does not eat the gap), and once at torchrun's start on a node that takes a blamed node's place (its
preflight moved beside torchrun: ddpctl.node.nodecheck.choose), the launcher runs
`python -m ddpctl.node.checkprog --local-only` in the workers' interpreter with torchrun's environment, as the
preflight does (ddpctl.node.nodecheck): the site's `health.node_check` within `node_check_timeout_s`, then the
built-in checks (ddpctl.node.hwcheck). No torch, no
network: a check costs an interpreter start and the checks themselves, niced as the launcher is. Only this thread
waits for it: the launcher's main loop and its heartbeat thread (ddpctl.health.peers) never do.

The check runs in a session of its own, its output to the attempt's `recheck-node-<r>.log` (rewritten by each
check; the site's output is bounded by checkprog). One that outlives `bound_s` is killed, its process group by pid,
and has failed: a check that hangs is a failed check, not a hung launcher. (The site's command runs in a session
of its own under checkprog, which kills it at its own bound, inside this one.) `verdict` (pure) judges the rest:

- failed (the site's check or a built-in one): a `node-check` event (failed, stage, why, the site's last lines),
  a line in the launcher's output, and the attempt ends (torchrun is stopped as the hang watchdog stops it); the
  decision's cause is `node-check`, blamed on this node, which is excluded at once (ddpctl.node.blame, exclude).
- could not run: the site's command could not start (the shell's 126/127: not executable, not found) or the check
  itself ended without a result. On a node where a check already ran in this attempt that is the node's doing (a
  filesystem holding the tool went away): a failure. Before that, it is the spec's or the setup's, alike on every
  node, and a false alarm must never end a healthy run: reported once per attempt (a `node-check` event with
  `failed` false, and a line), not counted; the built-in checks go on at each turn.
- a check that a signal the launcher did not send ended (the job's own end: Slurm signals every process of the
  step) says nothing; nor does any check once the attempt is ending (a stop, a hang or a lost node found).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ddpctl import proc, pyargv, safeio
from ddpctl.node.nodecheck import node_check_args
from ddpctl.node.torchrun import NodePlan
from ddpctl.run import history
from ddpctl.run.history import NodeRechecked
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec

POLL_S = 0.5  # how often the thread looks whether a check is due, and whether a running one ended
ALLOWANCE_S = 60  # beyond the site's bound: the interpreter's start on a busy node, the built-in checks
KILL_WAIT_S = 5.0  # for a killed check to go (one stuck in the kernel may never: it is not waited for longer)
WHY_MAX, OUTPUT_LINES, LINE_MAX = 300, 5, 200

Kind = Literal["pass", "fail", "unrun", "none"]


@dataclass(frozen=True)
class Verdict:
    kind: Kind  # pass; fail: ends the attempt; unrun: could not run, not counted; none: nothing to judge
    stage: str = ""  # site, hardware, timeout, start
    why: str = ""
    ran: bool = False  # a check ran here (a result came back, the site's command started): later "unrun" fails


def due(now: float, since: float, every_s: float, ending: bool, first: bool = False) -> bool:
    """Whether a check starts now: `every_s` after `since` (torchrun's start or the previous check's end), at once
    for a `first` check that was asked for at the start; never while the attempt is ending."""
    return not ending and (first or now - since >= every_s)


def verdict(status: int | None, record: Mapping[str, Any] | None, ran_before: bool, bound_s: float) -> Verdict:
    """One check's verdict (module docstring): `status` its exit status (None: killed at `bound_s`; negative: a
    signal ended it), `record` its result file (untrusted), `ran_before`: a check ran on this node earlier in
    the attempt."""
    if status is None:
        return Verdict("fail", "timeout", f"the check outlived its bound ({bound_s:g} s) and was killed")
    if status < 0:
        return Verdict("none")
    got = dict(record or {})
    ok, stage, why = got.get("ok"), got.get("stage"), got.get("why")
    final = isinstance(ok, bool) and "seconds" in got and (status == 0) == ok
    if not final:
        said = f"the check exited {status} without a result (the attempt's recheck-node-*.log says why)"
        return Verdict("fail", "start", said) if ran_before else Verdict("unrun", "start", said)
    unstarted = got.get("unstarted")
    if not ok:
        stage = stage if stage in ("site", "hardware") else "start"
        return Verdict("fail", stage, str(why or "")[:WHY_MAX], ran=not unstarted)
    if isinstance(unstarted, str):
        return Verdict("fail" if ran_before else "unrun", "start", unstarted[:WHY_MAX], ran=False)
    return Verdict("pass", ran=True)


def bound_s(spec: JobSpec) -> float:
    """How long a check may take: the site's own bound (it is killed at it), plus ALLOWANCE_S."""
    return (spec.health.node_check_timeout_s if spec.health.node_check else 0) + ALLOWANCE_S


def check_argv(python: str, spec: JobSpec, dist: DistEnv, layout: RunLayout) -> list[str]:
    return [
        *pyargv.python_module(python, "ddpctl.node.checkprog"),
        "--local-only",
        f"--result={result_path(layout, dist)}",
        f"--store-file={layout.check_store(dist.restart_count)}",  # required by checkprog, unused here
        f"--master-addr={dist.master_addr}",
        f"--node-rank={dist.node_rank}",
        f"--nnodes={dist.nnodes}",
        f"--gpus={spec.gpus_per_node}",
        f"--timeout={spec.health.preflight_timeout_s}",
        *[f"--disk={path}" for path in (layout.root, layout.checkpoints(spec.checkpoint.dir))],
        *node_check_args(spec),
    ]


def result_path(layout: RunLayout, dist: DistEnv) -> Path:
    return layout.attempt_dir(dist.restart_count) / f"recheck-node-{dist.node_rank}.json"


def wait_or_kill(child: proc.Popen, bound: float, stop: threading.Event) -> int | None:
    """The check's exit status; None when it outlived `bound` or the launcher stopped waiting (`stop`): then its
    process group is killed by pid and it is waited for KILL_WAIT_S at most."""
    deadline = time.monotonic() + bound
    while (code := child.poll()) is None:
        if time.monotonic() >= deadline or stop.is_set():
            kill_group(child)
            proc.wait_bounded(child, KILL_WAIT_S)
            return None
        stop.wait(0.1)
    return code


def kill_group(child: proc.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)  # its own session: the site's shell and what it started go too


class Recheck:
    """The thread (module docstring). `ending` says the attempt is ending (nothing is judged then);
    `end_attempt` stops torchrun."""

    def __init__(
        self, spec: JobSpec, dist: DistEnv, layout: RunLayout, plan: NodePlan, env: Mapping[str, str],
        *, end_attempt: Callable[[], None], ending: Callable[[], bool], at_start: bool = False,
    ) -> None:  # fmt: skip
        self.dist, self.layout = dist, layout
        self.every_s = float(spec.health.node_check_every_min or 0) * 60  # 0: only the check at the start
        self.at_start = at_start
        self.bound_s = bound_s(spec)
        self.argv = check_argv(plan.argv[0], spec, dist, layout)  # torchrun's interpreter: the workers'
        self.env = {**env, **plan.env_dict()}
        self.end_attempt, self.ending = end_attempt, ending
        self.ran = self.told = False
        self.failed: NodeRechecked | None = None
        self.checks, self.spent_s = 0, 0.0  # how many checks ran, and their time together
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddpctl-recheck", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """torchrun exited: a check still running is killed, its verdict no longer matters."""
        self._stop.set()
        self._thread.join(timeout=KILL_WAIT_S + 1)

    def _run(self) -> None:
        since, first = time.monotonic(), self.at_start
        while not self._stop.wait(POLL_S) and self.failed is None:
            if not due(time.monotonic(), since, self.every_s, self.ending(), first):
                continue
            try:
                self.once()
            except Exception as err:  # a dead thread would stop the checks unseen: say it, go on
                self.say(f"a node check could not be run, checking on: {err!r:.200}")
            if first and self.ran and self.failed is None and not self.ending():
                self.say(f"node check beside torchrun passed in {self.spent_s:.1f} s")
            since, first = time.monotonic(), False
            if not self.every_s:
                return

    def once(self) -> None:
        """One check, judged and acted on."""
        started = time.monotonic()
        result = result_path(self.layout, self.dist)
        with contextlib.suppress(FileNotFoundError):
            result.unlink()  # a result left by the previous check is never this one's
        status = self.run_child(result.with_suffix(".log"))
        seconds = time.monotonic() - started
        self.checks, self.spent_s = self.checks + 1, self.spent_s + seconds
        if self._stop.is_set() or self.ending():
            return
        record = safeio.read_json(result)
        found = verdict(status, record, self.ran, self.bound_s)
        self.ran = self.ran or found.ran
        if found.kind == "fail":
            self.fail(found, seconds, (record or {}).get("output"))
        elif found.kind == "unrun" and not self.told:
            self.told = True
            self.record(found, seconds, None)
            self.say(f"node check could not run ({found.why}); not counted as a failure, the checks go on")

    def run_child(self, log_path: Path) -> int | None:
        try:
            fd = safeio.open_fd(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "wb") as log:
                child = proc.spawn(
                    self.argv, env=self.env, stdout=log, stderr=proc.STDOUT, stdin=proc.DEVNULL, new_session=True
                )
        except OSError as err:  # the interpreter cannot be started: no result, as a check that crashed
            self.say(f"node check not started: {safeio.describe(err)}")
            return 1
        return wait_or_kill(child, self.bound_s, self._stop)

    def fail(self, found: Verdict, seconds: float, output: object) -> None:
        self.failed = self.record(found, seconds, output)
        self.say(f"node check failed ({found.stage}: {found.why}); ending the attempt")
        self.end_attempt()

    def record(self, found: Verdict, seconds: float, output: object) -> NodeRechecked:
        lines = output if isinstance(output, list) else []
        event = NodeRechecked(
            attempt=self.dist.restart_count,
            node=self.dist.node_name,
            node_rank=self.dist.node_rank,
            failed=found.kind == "fail",
            stage=found.stage,
            why=found.why[:WHY_MAX],
            seconds=round(seconds, 2),
            output=tuple(line[:LINE_MAX] for line in lines[:OUTPUT_LINES] if isinstance(line, str)),
        )
        return history.append(self.layout.events, event)

    def say(self, text: str) -> None:
        print(f"ddpctl launch [{self.dist.node_name}]: {text}", flush=True)


def begin(
    spec: JobSpec, dist: DistEnv, layout: RunLayout, plan: NodePlan, env: Mapping[str, str],
    *, end_attempt: Callable[[], None], ending: Callable[[], bool], at_start: bool = False,
) -> Recheck | None:  # fmt: skip
    """The node's checks during training, started; None where the spec asks for none and `at_start` (a check once,
    at torchrun's start) is not asked for either."""
    if not spec.health.node_check_every_min and not at_start:
        return None
    recheck = Recheck(spec, dist, layout, plan, env, end_attempt=end_attempt, ending=ending, at_start=at_start)
    recheck.start()
    return recheck
