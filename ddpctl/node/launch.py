"""`ddpctl launch RUN_DIR`: the node side. One per node (one srun task per node, or the local backend).

Reads its environment once, derives DistEnv, spawns torchrun with the node plan, and relays its exit status.
The stop signal (the spec's requeue.signal) is turned into the node's stop file, which every worker's
watcher sees; torchrun and the workers inherit the signal as ignored, so neither dies of it (torchrun would
otherwise, and then SIGKILL the workers mid-checkpoint).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from ddpctl import exitcodes, proc, safeio
from ddpctl.errors import DdpctlError, SlurmEnvError
from ddpctl.node import gpus, nodecheck, recheck
from ddpctl.node.ackwatch import AckWatch
from ddpctl.node.oom import OomCounter
from ddpctl.node.ownckpt import OwnCheckpoints
from ddpctl.node.rundist import run_dist, run_node_spec
from ddpctl.node.site import node_site
from ddpctl.node.torchrun import NodePlan, node_plan
from ddpctl.run import envvars, history, tracking
from ddpctl.run.history import Launched, NodeExited, OomKilled, StopSignalled
from ddpctl.run.layout import RunLayout
from ddpctl.run.rundir import wait_for_run_dir
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import JobSpec

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
REPORT_TAIL_BYTES = 1 << 20  # torchrun's failure report is at the end of its log
LAUNCHER_NICE = 5  # added to the launcher's own niceness once torchrun is started (see launch())


def prepare(run_dir: Path, env: Mapping[str, str]) -> tuple[JobSpec, DistEnv, RunLayout, NodePlan, OwnCheckpoints]:
    layout = RunLayout(run_dir)
    wait_for_run_dir(layout)  # a job that started before submit committed it (run_spec says if it never came)
    # Every attempt runs the code as it was at submit (the run's snapshot), not what the path holds now.
    spec = run_node_spec(layout)
    site = node_site(env)
    dist = run_dist(spec, env)  # `ddpctl env` inside the run shows this same derivation
    if site.checks_gpus and (short := gpus.shortage(env, dist.nproc_per_node, spec.gpus_per_node, dist.node_name)):
        raise SlurmEnvError(short)
    ifname, local_addr = site.network(spec, dist)
    python = spec.python or sys.executable
    trackers = tracking.read(layout) if spec.tracking else {}
    own = OwnCheckpoints.at_start(spec, layout)
    plan = node_plan(
        spec, dist, layout, python=python, ifname=ifname, local_addr=local_addr, inherited=dict(env),
        trackers=trackers, resume_from=own.resume_from,
    )  # fmt: skip
    return spec, dist, layout, plan, own


def probe_address(spec: JobSpec, dist: DistEnv, env: Mapping[str, str]) -> str | None:
    """Where this node's network beat listens (ddpctl.health.probe): the address the node advertises to the
    others, on the interface the ranks' traffic uses; None on loopback (the local backend's simulated nodes have
    no network between them)."""
    ifname, address = node_site(env).network(spec, dist)
    return None if ifname == "lo" else address


def write_node_info(layout: RunLayout, dist: DistEnv, static: bool) -> None:
    path = layout.node_info(dist.restart_count, dist.node_rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Only static rendezvous fixes which global ranks this node gets; under c10d each worker records its own
    # placement (rank-<r>.json), and an empty list here says "not known by the launcher".
    first = dist.node_rank * dist.nproc_per_node
    ranks = list(range(first, first + dist.nproc_per_node)) if static else []
    info = {
        "node": dist.node_name,
        "node_rank": dist.node_rank,
        "nproc_per_node": dist.nproc_per_node,
        "ranks": ranks,
        "pid": os.getpid(),
        "started": time.time(),
    }
    safeio.write_text_atomic(path, json.dumps(info) + "\n")


class Relay:
    """Signal plumbing between Slurm and torchrun for one node."""

    def __init__(self, layout: RunLayout, dist: DistEnv, stop_sig: signal.Signals, lead_s: int = 120) -> None:
        self.layout, self.dist, self.stop_sig = layout, dist, stop_sig
        self.child: proc.Popen | None = None
        self.stop_received = False
        self.ack = AckWatch(layout, dist.restart_count, dist.node_rank, lead_s)

    def install(self) -> None:
        signal.signal(self.stop_sig, self.on_stop)
        for sig in FORWARDED:
            signal.signal(sig, self.on_forward)
        # A stop that came while this interpreter started (the signal ignored then, or sent before the step
        # ran): the fan-out wrote the node's stop file first, so it is not lost; take it as received.
        if self.layout.stop_file(self.dist.restart_count, self.dist.node_rank).exists():
            self.on_stop(self.stop_sig, None)

    def on_stop(self, signum: int, _frame: FrameType | None) -> None:
        # Only a flag file and one event line here: the checkpoint itself happens in the workers at a step
        # boundary, never inside a signal handler.
        stop_file = self.layout.stop_file(self.dist.restart_count, self.dist.node_rank)
        stop_file.parent.mkdir(parents=True, exist_ok=True)
        safeio.touch(stop_file)
        if not self.stop_received:
            history.append(
                self.layout.events,
                StopSignalled(
                    node=self.dist.node_name, attempt=self.dist.restart_count, signal=signal.Signals(signum).name
                ),
            )
        self.stop_received = True
        self.ack.stop_requested()

    def on_forward(self, signum: int, _frame: FrameType | None) -> None:
        if self.child and self.child.poll() is None:
            self.child.send_signal(signum)

    def end_attempt(self) -> None:
        """The hang watchdog's way out: torchrun forwards SIGTERM to the workers and exits non-zero."""
        if self.child and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)

    def ignore_stop_in_child(self) -> None:
        signal.signal(self.stop_sig, signal.SIG_IGN)


def start_torchrun(plan: NodePlan, relay: Relay, log_path: Path, env: Mapping[str, str]) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with safeio.open_append_file(log_path) as log:
        relay.child = proc.spawn(
            plan.argv,
            env={**env, **plan.env_dict()},
            stdout=log,
            stderr=proc.STDOUT,
            preexec_fn=relay.ignore_stop_in_child,
        )  # single-threaded here; sets SIG_IGN only


def wait_torchrun(relay: Relay) -> int:
    assert relay.child is not None
    # Polled, not a blocking wait: a stop that no rank acknowledges must be reported while it still matters.
    while (code := relay.child.poll()) is None:
        relay.ack.tick()
        time.sleep(0.2)
    return code if code >= 0 else 128 - code


def record_oom(layout: RunLayout, dist: DistEnv, kills: int, limit: int | None) -> None:
    """An `oom` event (and a line in the node log's stream) when the OOM killer struck during this attempt."""
    if not kills:
        return
    from ddpctl.health.report import describe_oom

    event = history.append(
        layout.events, OomKilled(node=dist.node_name, attempt=dist.restart_count, kills=kills, limit_bytes=limit)
    )
    print(f"ddpctl launch [{dist.node_name}]: {describe_oom(event)}", flush=True)


def record_launch(layout: RunLayout, dist: DistEnv, plan: NodePlan, env: Mapping[str, str]) -> None:
    """The `launch` event: this node's derivation, torchrun's argv and the GPUs Slurm gave it."""
    history.append(
        layout.events,
        Launched(
            node=dist.node_name,
            attempt=dist.restart_count,
            dist=dist.as_json(),
            argv=tuple(plan.argv),
            gpus=tuple(gpus.mapping(env, dist.nproc_per_node)),
            cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        ),
    )


def record_attempt_start(layout: RunLayout, dist: DistEnv, env: Mapping[str, str]) -> None:
    """Node 0's launcher records the attempt's start for the batch shell that set `envvars.ATTEMPT_AT` (the
    template): here, in a process already running and once torchrun is started, it costs no interpreter start
    beside the nodes' start-up (on the batch host, beside node 0's launcher and torchrun, which hosts the
    rendezvous store). The shell records it after the step if no launcher did."""
    if dist.node_rank != 0 or envvars.ATTEMPT_AT not in env or not node_site(env).records_attempt_start:
        return
    from ddpctl.node.batch import batch_start

    try:
        batch_start(layout, env, env[envvars.ATTEMPT_AT])
    except (OSError, DdpctlError) as err:  # torchrun runs: never leave it for a record (decide writes it then)
        print(f"ddpctl launch [{dist.node_name}]: attempt start not recorded here: {err}", flush=True)


def failed_ranks(layout: RunLayout, dist: DistEnv) -> tuple[dict[str, Any], ...]:
    """The ranks torchrun's failure report (at the end of this node's log) names: what the batch shell's
    decision blames (`ddpctl.node.blame`) without reading any log itself."""
    from ddpctl.node.torchreport import launcher_failures

    try:
        text, _ = safeio.read_tail(layout.node_log(dist.restart_count, dist.node_rank), REPORT_TAIL_BYTES, 0)
    except OSError:
        return ()
    return tuple(
        {"rank": f.rank, "exitcode": f.exitcode, "t": f.when} for f in launcher_failures(text.splitlines())[:64]
    )


def record_node_exit(layout: RunLayout, dist: DistEnv, code: int, hung: bool) -> int:
    """The `node-exit` event and line; returns the status this launcher exits with."""
    stopped = layout.stopped_marker(dist.restart_count).exists()
    # A node stopped for requeue exits 0 like a finished one: srun --kill-on-bad-exit must not take down
    # nodes still leaving cleanly. The stopped marker, not this status, tells the batch shell to requeue.
    final = code or (exitcodes.FAILURE if hung else 0)  # a hung attempt is a failure, never a success
    history.append(
        layout.events,
        NodeExited(
            node=dist.node_name,
            attempt=dist.restart_count,
            torchrun_exit=code,
            exit=final,
            stopped=stopped,
            hang=hung,
            failed=failed_ranks(layout, dist) if code else (),
        ),
    )
    print(
        f"ddpctl launch [{dist.node_name}]: torchrun exited {code}; launch exits {final}"
        f"{' (stopped for requeue)' if stopped else ''}",
        flush=True,
    )
    with contextlib.suppress(OSError):  # after a lost node the batch shell waits for this (a bounded wait)
        safeio.touch(layout.node_left_marker(dist.restart_count, dist.node_rank))
    return final


def launch(run_dir: Path, env: Mapping[str, str]) -> int:
    spec, dist, layout, plan, own = prepare(run_dir, env)
    relay = Relay(layout, dist, proc.signal_named(spec.requeue.signal), spec.requeue.lead_s)
    relay.install()
    oom = OomCounter()
    oom.start()
    check = nodecheck.fit(spec, dist, layout, plan, env=env, relay=relay)
    if check is None:
        return nodecheck.leave(layout, dist)
    start_torchrun(plan, relay, layout.node_log(dist.restart_count, dist.node_rank), env)
    # Everything else comes after torchrun is on its way, and niced: at start-up every CPU is busy starting torchrun
    # and importing torch in each rank, and the launcher's work would delay every rank's first step. Its children
    # keep their priority; its own work (records, polling, the watchdog thread) is light and never urgent.
    with contextlib.suppress(OSError):
        os.nice(LAUNCHER_NICE)
    write_node_info(layout, dist, static=spec.rendezvous == "static")
    record_launch(layout, dist, plan, env)
    record_attempt_start(layout, dist, env)
    if dist.node_rank == 0:
        own.record_start(layout, dist.restart_count)
    from ddpctl.health.summary import JobView, Seat
    from ddpctl.health.watchdog import Watchdog

    # One view of the job's progress for both threads: this node's ranks' records and the other nodes' summaries.
    view = JobView(Seat(layout, dist.restart_count, dist.node_name, dist.node_rank, dist.nnodes))
    assert relay.child is not None
    watchdog = Watchdog(view, spec.health, end_attempt=relay.end_attempt, torchrun=relay.child.pid)
    watchdog.start()
    from ddpctl.health.peers import PeerWatch

    # The nodes watch each other (a heartbeat each, independent of the ranks): a lost node ends every node's ranks.
    peers = PeerWatch(view, end_attempt=relay.end_attempt, address=probe_address(spec, dist, env))
    peers.start()
    checks = recheck.begin(  # the node's checks during training, where the spec asks for them
        spec, dist, layout, plan, env, end_attempt=relay.end_attempt,
        ending=lambda: relay.stop_received or watchdog.hung or peers.ended, at_start=check.how == "beside",
    )  # fmt: skip
    code = wait_torchrun(relay)
    if checks is not None:
        checks.stop()
    peers.stop()
    watchdog.stop()
    if code and not (watchdog.hung or relay.stop_received or layout.stopped_marker(dist.restart_count).exists()):
        peers.linger()
    record_oom(layout, dist, *oom.since())
    for warning in own.check_end(layout, dist.restart_count) if dist.node_rank == 0 else []:
        print(f"ddpctl launch [{dist.node_name}]: {warning}", flush=True)
    return record_node_exit(layout, dist, code, watchdog.hung)
