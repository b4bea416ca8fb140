"""Every path under a run directory, in one place (pure: nothing here touches the filesystem).

<run_dir>/<name>/<job_id>/
    job.yaml            resolved spec as submitted
    job.sbatch          rendered batch script (sbatch backend)
    snapshot.json       the code snapshot every attempt runs (ddpctl.snapshot; absent with snapshot: off)
    code/               this run's own copy of the snapshot: every attempt runs the script from here
    slurm.out           batch-shell output, appended across requeues; sbatch: a link to ../.slurm-<job_id>.out
    events.jsonl        one JSON object per line, appended: the run's history (each event: ddpctl.run.history)
    checkpoints/        default checkpoint directory (spec checkpoint.dir overrides)
    preempt-request.json  left by `ddpctl preempt --as KIND` just before it signals; consumed by the decision
    cancel-request.json   left by `ddpctl cancel` of a chained run: no successor may start after it
    finished            left by the decision that ends the run, before its event (the batch shell's cheap test)
    excluded-nodes      the nodes the run excluded (its `node-excluded` events; the user's own `exclude`
                        merged in), one a line: the requeue path updates the job's ExcNodeList where it exists
    supervisor.pid      local backend: the supervisor playing the batch shell (pid and start time)
    supervisor.lock     local backend: held by the supervisor and its launchers while the job runs
    submitit/           submitit backend: submitit's own folder (pickles, its logs)
    attempt-<restart>/  one per run of the job (SLURM_RESTART_COUNT, 0 on the first run)
        rank-<global rank>.log    worker stdout+stderr, appended
        rank-<global rank>.json   written by that worker: which node it runs on (c10d decides placement)
        node-<node rank>.log      launcher (torchrun agent) output for that node
        node-<node rank>.json     written by that node's launcher: node name, node rank, global ranks
        stop-node-<node rank>     exists once that node's launcher received the stop signal
        stopped.json              written by rank 0 after the agreed stop checkpoint (or the script's own stop)
        progress-<rank>.json      that rank's latest progress record (runtime.Heartbeat, rewritten <= 1/s)
        hang.json                 exists once a node's watchdog declared the attempt hung
        beat-node-<node rank>.json  that node's launcher heartbeat (ddpctl.health.peers, rewritten every 2 s)
        summary-node-<node rank>.json  that node's ranks' progress, digested (ddpctl.health.summary, every poll)
        node-lost.json            exists once a node's launcher declared a peer node lost (the batch shell tests it)
        listen-rank-<rank>.json   a rank announced that it listens for stops (and how)
<run_dir>/<name>/.staging-<token>/  a run dir (or a sweep's, its tasks in tasks/<index>/) before its commit
<run_dir>/<name>/sweep-<job_id>/    a sweep's own dir (its array script, points), beside its tasks' <job>_<task>/
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ddpctl.record import Record

ATTEMPT_RE = re.compile(r"^attempt-(\d+)$")
ATTEMPT_GLOB = "attempt-*"
RANK_LOG_RE = re.compile(r"^rank-(\d+)\.log$")
RANK_INFO_RE = re.compile(r"^rank-(\d+)\.json$")
PROGRESS_RE = re.compile(r"^progress-(\d+)\.json$")
SERIES_RE = re.compile(r"^series-(\d+)\.jsonl$")
LISTEN_GLOB = "listen-rank-*.json"
NODE_INFO_GLOB = "node-*.json"
NODE_LOG_GLOB = "node-*.log"
RANK_INFO_GLOB = "rank-*.json"
RANK_PLACEHOLDER = "{rank}"  # filled in by each worker (it learns its rank from torchrun)
FINISHED = "finished"
CANCEL_REQUEST = "cancel-request.json"
# The run may have ended: the batch shell tests for them before it pays for `internal chain-check`.
ENDED_MARKERS = (FINISHED, CANCEL_REQUEST)
EXCLUDED_NODES = "excluded-nodes"  # the run excluded a node: the batch shell tests it before `internal exclude`
SPARE_RESTARTS = "spare-restarts-"  # + the job id; the batch shell reads it (the template gets it from here)
NODE_LOST = "node-lost.json"  # per attempt; the batch shell knows the name (the template gets it from here)
NODE_LEFT = "left-node-"  # + node rank, per attempt: that launcher recorded its exit (the batch shell counts them)
STAGING = ".staging-"  # + a random token: committed by renaming it to its job id (ddpctl.run.rundir)
STAGED_TASKS = "tasks"  # in a staged sweep dir: each task's run dir, by point index, until its commit
SWEEP_DIR = "sweep-"  # + the sweep's job id
ARRAY_OUTPUT = ".slurm-%A_%a.out"  # a job array's tasks' batch output, as `sbatch_output` (%A: the array's id)


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class RunLayout(Record):
    """The paths of one run directory, `root`."""

    root: Path

    @property
    def spec_file(self) -> Path:
        return self.root / "job.yaml"

    @property
    def script_file(self) -> Path:
        return self.root / "job.sbatch"

    @property
    def snapshot_file(self) -> Path:
        return self.root / "snapshot.json"

    @property
    def code_dir(self) -> Path:
        return self.root / "code"

    @property
    def batch_log(self) -> Path:
        return self.root / "slurm.out"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def default_checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def checkpoints(self, configured: str | None) -> Path:
        """The checkpoint directory: the spec's checkpoint.dir when set, else the run dir's own."""
        return Path(configured) if configured else self.default_checkpoints

    @property
    def preempt_request(self) -> Path:
        """Written by `ddpctl preempt --as KIND` just before it signals, so the decision knows the kind."""
        return self.root / "preempt-request.json"

    @property
    def cancel_request(self) -> Path:
        """Written by `ddpctl cancel` before it cancels a chained run's jobs: no successor may start after it."""
        return self.root / CANCEL_REQUEST

    @property
    def finished_marker(self) -> Path:
        """Written by the `finish` decision before its event: the batch shell's cheap test, on a requeued or
        chained start, of whether it must ask `internal chain-check` (an interpreter start) at all."""
        return self.root / FINISHED

    @property
    def excluded_nodes(self) -> Path:
        return self.root / EXCLUDED_NODES

    def spare_restarts(self, job_id: str) -> Path:
        """How many attempts the batch shell of job `job_id` restarted inside it (spare_nodes): a number the shell
        reads at its start, so a requeued job numbers its attempts past them (ddpctl.node.spare)."""
        return self.root / f"{SPARE_RESTARTS}{job_id}"

    @property
    def tracking_file(self) -> Path:
        """The run's tracker identities, written once at submit (ddpctl.run.tracking)."""
        return self.root / "tracking.json"

    @property
    def tensorboard_dir(self) -> Path:
        return self.root / "tensorboard"

    @property
    def supervisor_pid(self) -> Path:
        return self.root / "supervisor.pid"

    @property
    def supervisor_lock(self) -> Path:
        """Local backend: flock'ed by the supervisor and its launchers while the job runs (backends/local/processes)."""
        return self.root / "supervisor.lock"

    @property
    def submitit_dir(self) -> Path:
        return self.root / "submitit"

    def attempt_dir(self, restart: int) -> Path:
        return self.root / f"attempt-{restart}"

    def rank_log(self, restart: int, rank: int) -> Path:
        return self.attempt_dir(restart) / f"rank-{rank}.log"

    def rank_log_pattern(self, restart: int) -> str:
        """The rank log path with RANK_PLACEHOLDER for the rank: the launcher cannot know its workers' ranks."""
        return str(self.attempt_dir(restart) / f"rank-{RANK_PLACEHOLDER}.log")

    def rank_info(self, restart: int, rank: int) -> Path:
        return rank_info_of(self.rank_log(restart, rank))

    def node_log(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"node-{node_rank}.log"

    def node_info(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"node-{node_rank}.json"

    def stop_file(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"stop-node-{node_rank}"

    def stopped_marker(self, restart: int) -> Path:
        return self.attempt_dir(restart) / "stopped.json"

    def progress_file(self, restart: int, rank: int) -> Path:
        return self.attempt_dir(restart) / f"progress-{rank}.json"

    def series_file(self, restart: int, rank: int) -> Path:
        """A rank's metrics over time in that attempt (ddpctl.runtime.series)."""
        return self.attempt_dir(restart) / f"series-{rank}.jsonl"

    @property
    def report_file(self) -> Path:
        """Where `ddpctl report` writes by default."""
        return self.root / "report.html"

    def node_summary(self, restart: int, node_rank: int) -> Path:
        """What a node's watchdog read of its own ranks' progress records (ddpctl.health.summary)."""
        return self.attempt_dir(restart) / f"summary-node-{node_rank}.json"

    def hang_marker(self, restart: int) -> Path:
        return self.attempt_dir(restart) / "hang.json"

    def flight_record(self, restart: int, rank: int | None = None) -> Path:
        """A rank's flight-recorder dump; None: the watchdog's request for them (ddpctl.runtime.flightrec)."""
        return self.attempt_dir(restart) / ("fr-request.json" if rank is None else f"fr-rank-{rank}.json")

    def node_beat(self, restart: int, node_rank: int) -> Path:
        """A node's launcher heartbeat, written independently of its ranks (ddpctl.health.peers)."""
        return self.attempt_dir(restart) / f"beat-node-{node_rank}.json"

    def node_left_marker(self, restart: int, node_rank: int) -> Path:
        """Left by a launcher once its node-exit is recorded: after a lost node, the batch shell waits for the
        others' (templates/ddp.sbatch.j2) before it ends the step srun cannot end."""
        return self.attempt_dir(restart) / f"{NODE_LEFT}{node_rank}"

    def node_lost_marker(self, restart: int) -> Path:
        """Created (exclusively) by the first launcher that found a peer node lost in that attempt."""
        return self.attempt_dir(restart) / NODE_LOST

    def listen_marker(self, restart: int, rank: int) -> Path:
        return self.attempt_dir(restart) / f"listen-rank-{rank}.json"

    def check_store(self, restart: int) -> Path:
        """Where node 0's preflight check publishes the port of its rendezvous store (ddpctl.node.nodecheck)."""
        return self.attempt_dir(restart) / "check-store.json"

    def check_result(self, restart: int, node_rank: int) -> Path:
        return self.attempt_dir(restart) / f"check-node-{node_rank}.json"


def fill_rank(pattern: str, rank: str) -> Path:
    """The rank log path from `$DDPCTL_RANK_LOG_PATTERN`: `{rank}` is replaced in the file name only (the
    directory, the user's run_dir, is data: it may hold `{x}`, `%` or even `{rank}`)."""
    path = Path(pattern)
    return path.parent / path.name.replace(RANK_PLACEHOLDER, rank)


def slurm_filename(path: Path) -> str:
    """`path` as literal text inside a Slurm filename pattern (--output): `%` is Slurm's escape, so double it."""
    return str(path).replace("%", "%%")


def slurm_output(run_base: Path) -> str:
    """sbatch's --output for runs under `run_base`: <run_base>/%j/slurm.out, with run_base taken literally."""
    return str(RunLayout(Path(slurm_filename(run_base)) / "%j").batch_log)


def sbatch_output(run_base: Path) -> str:
    """The sbatch backend's --output: <run_base>/.slurm-%j.out, beside the run dirs rather than inside one, so
    that it can be opened by a job that starts before submit has renamed its run dir to the job id (submit
    then hard-links it into the run dir as slurm.out: `batch_output` is the file)."""
    return str(Path(slurm_filename(run_base)) / ".slurm-%j.out")


def batch_output(run_base: Path, job_id: str) -> Path:
    """The file `sbatch_output` names for `job_id`."""
    return run_base / f".slurm-{job_id}.out"


def attempt_of_dir(dirname: str) -> int | None:
    """The attempt an `attempt-<n>` directory name holds (None for any other name)."""
    return _number(ATTEMPT_RE, dirname)


def attempts_in(names: Iterable[str]) -> list[int]:
    """The attempts among a run dir's entry names, oldest first."""
    return sorted(a for name in names if (a := attempt_of_dir(name)) is not None)


def rank_info_of(rank_log: Path) -> Path:
    """A worker's placement file, beside its log (the worker knows only its log's path)."""
    return rank_log.with_suffix(".json")


def rank_of_log(filename: str) -> int | None:
    return _number(RANK_LOG_RE, filename)


def rank_of_info(filename: str) -> int | None:
    """The rank a worker's placement file (`rank-<r>.json`) is for."""
    return _number(RANK_INFO_RE, filename)


def rank_of_progress(filename: str) -> int | None:
    """The rank a progress record (`progress-<r>.json`) is for."""
    return _number(PROGRESS_RE, filename)


def sweep_dir(run_base: Path, sweep_id: str) -> Path:
    return run_base / f"{SWEEP_DIR}{sweep_id}"


def sweep_report_file(run_base: Path, sweep: str) -> Path:
    """Where `ddpctl report SWEEP` writes by default: beside its tasks' run dirs."""
    return run_base / f"report-sweep-{sweep}.html"


def rank_of_series(filename: str) -> int | None:
    return _number(SERIES_RE, filename)


def _number(pattern: re.Pattern[str], name: str) -> int | None:
    match = pattern.match(name)
    return int(match.group(1)) if match else None
