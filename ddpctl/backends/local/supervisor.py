"""The local backend's stand-in for the batch shell: one `ddpctl launch` per simulated node, per attempt.

Node names are local1..localN; everything runs on loopback. The stop signal is fanned out to each node's
launcher exactly as `scancel --signal` does on a cluster, and the requeue decision is the same function.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from ddpctl import exitcodes, proc, pyargv
from ddpctl.backends.local import grace as local_grace
from ddpctl.backends.local import processes as local_proc
from ddpctl.node import batch
from ddpctl.node.localenv import local_node_env
from ddpctl.run import history
from ddpctl.run.history import Cancelled
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import run_spec
from ddpctl.spec import JobSpec


class Supervisor:
    def __init__(self, layout: RunLayout, spec: JobSpec, job_number: int, lock_fd: int | None = None) -> None:
        self.layout, self.spec, self.job_number = layout, spec, job_number
        self.lock_fds = () if lock_fd is None else (lock_fd,)
        self.attempt = 0
        self.port: int | None = None  # this attempt's rendezvous port, found free when it starts
        self.launchers: list[proc.Popen] = []
        self.cancelled = False
        self.stop_at: float | None = None  # when this attempt's stop was requested (monotonic)
        self.killed = False
        self.excluded: frozenset[str] = frozenset()  # the run's excluded nodes: this attempt's names skip them
        self.clock = local_grace.TimeLimit(spec, time.monotonic())  # `time:` as Slurm keeps it, per attempt

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        return {**env, **dict(self.spec.env), **self.node_env(0)}

    def node_env(self, rank: int) -> dict[str, str]:
        return local_node_env(self.spec, self.job_number, self.attempt, rank, self.port, excluded=self.excluded)

    def on_stop_signal(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name.removeprefix("SIG")
        if self.stop_at is None:
            self.stop_at = time.monotonic()
        batch.on_signal(self.layout, self.base_env(), name, lambda: self.clock.left(time.monotonic()), self.fan_out)

    def enforce_time_limit(self) -> None:
        """The spec's `time:` as Slurm keeps it: the stop signal `lead_s` before the limit, the kill at it."""
        now = time.monotonic()
        if self.clock.warning_due(now):
            print(f"ddpctl local: attempt {self.attempt}: {self.clock.warning_line()}", flush=True)
            self.on_stop_signal(proc.signal_named(self.spec.requeue.signal), None)
        if self.clock.kill_due(now) and not self.killed:
            self.killed = True
            print(f"ddpctl local: attempt {self.attempt}: {self.clock.kill_line()}", flush=True)
            self.terminate_nodes()

    def enforce_grace(self) -> None:
        """Kill the attempt once its stop went unacknowledged past the lead time, as Slurm would."""
        acknowledged = self.layout.stopped_marker(self.attempt).exists()
        if self.killed or not local_grace.kill_due(
            self.stop_at, self.spec.requeue.lead_s, time.monotonic(), acknowledged
        ):
            return
        self.killed = True
        waited = time.monotonic() - (self.stop_at or 0.0)
        print(local_grace.record_kill(self.layout, self.spec, self.attempt, waited), flush=True)
        self.terminate_nodes()

    def fan_out(self, signal_name: str) -> None:
        for launcher in self.launchers:
            if launcher.poll() is None:
                launcher.send_signal(proc.signal_named(signal_name))

    def on_cancel(self, _signum: int, _frame: FrameType | None) -> None:
        self.cancelled = True
        self.terminate_nodes()

    def terminate_nodes(self) -> None:
        for launcher in self.launchers:
            if launcher.poll() is None:
                launcher.send_signal(signal.SIGTERM)

    def start_nodes(self) -> None:
        base = self.base_env()
        self.launchers = [
            # Each launcher holds the job's lock too (it is "running" until the last node is down) and dies
            # with the supervisor: a kill -9 of the supervisor takes its nodes down instead of orphaning them.
            proc.spawn(
                [*pyargv.python_module(sys.executable, "ddpctl"), "launch", str(self.layout.root)],
                env={**base, **self.node_env(rank)},
                pass_fds=self.lock_fds,
                # The stop signal inherited as ignored until the launcher's handler takes it: a stop while its
                # interpreter starts reaches it through the stop file (it looks when it arms), never kills it.
                preexec_fn=local_proc.launcher_preexec(proc.signal_named(self.spec.requeue.signal)),
            )
            for rank in range(self.spec.nodes)
        ]

    def wait_nodes(self) -> int:
        """Like srun --kill-on-bad-exit: the first failing node takes the others down."""
        codes: dict[int, int] = {}
        while len(codes) < len(self.launchers):
            for index, launcher in enumerate(self.launchers):
                code = launcher.poll()
                if code is not None and index not in codes:
                    codes[index] = code if code >= 0 else 128 - code
                    if codes[index] not in (exitcodes.OK,):
                        self.terminate_nodes()
            self.enforce_grace()
            self.enforce_time_limit()
            time.sleep(0.1)
        return max(codes.values(), key=lambda c: (c not in (0,), c))

    def arm(self) -> None:
        """Catch the stop and cancel signals; before the pid is published (`preempt` and `cancel` signal the pid
        they read), else a stop right after submit would find the default action: death."""
        signal.signal(proc.signal_named(self.spec.requeue.signal), self.on_stop_signal)
        signal.signal(signal.SIGTERM, self.on_cancel)
        signal.signal(signal.SIGINT, self.on_cancel)

    def run(self) -> int:
        while True:
            self.port = local_proc.free_loopback_port()
            self.excluded = history.load(self.layout.events).excluded_nodes()
            env = self.base_env()
            batch.batch_start(self.layout, env)
            self.clock = local_grace.TimeLimit(self.spec, time.monotonic())
            self.start_nodes()
            code = self.wait_nodes()
            if self.cancelled:
                history.append(self.layout.events, Cancelled(attempt=self.attempt))
                return 128 + signal.SIGTERM
            decision = batch.decide_run(self.layout, env, code)
            print(
                f"ddpctl local: attempt {self.attempt} ended ({code}): {decision.action}: {decision.reason}", flush=True
            )
            if decision.action != "requeue":
                return decision.exit_code
            self.attempt += 1
            self.stop_at, self.killed = None, False  # here, not at the top: a stop before attempt 0 started counts


def supervise(run_dir: Path, job_number: int, lock_fd: int | None = None) -> int:
    layout = RunLayout(run_dir)
    supervisor = Supervisor(layout, run_spec(layout), job_number, lock_fd)
    supervisor.arm()
    local_proc.write_pid(layout.root, os.getpid())
    return supervisor.run()
