"""`--backend submitit`: submitit writes and submits the batch script; the rest is the sbatch backend's.

Same run dir, registry record, events, launcher and requeue decision; submitit is imported inside functions
only, so the CLI (and `status` of a submitit job) works without it. One task per node runs `NodeTask()`,
which calls `ddpctl.launch.launch` in-process. submitit's folder is `<run dir>/submitit/` (pickles, per-task
logs, script); submitit creates it under `<run_base>/<job id>/` itself, so the job is submitted `--hold`,
the folder moved into the staging dir, that renamed to the run dir, and then the job released.

How the stop signal flows (submitit 1.5: core/job_environment.py, core/submission.py, slurm/slurm.py):
1. `--signal=<requeue.signal>@<lead_s>` without `B:`: the time-limit warning, the preemption user signal and
   `ddpctl preempt` (`scancel --signal=SIG JOBID`) reach the step tasks on every node, not the batch shell.
2. Each task installs submitit's `checkpoint_and_try_requeue` for that signal (SUBMITIT_PREEMPT_SIGNAL is
   exported) before calling `NodeTask()`; `launch()` then installs its Relay for it, and the last
   `signal.signal` wins: while the launcher runs the Relay handles the signal on every node (that node's
   stop file; torchrun and the workers ignore the signal), so no node dies of it.
3. On global task 0 a watcher thread sees the first stop file and runs `batch.on_signal` at once (the
   `signal` event with its kind; every node's stop file, for a launcher not listening yet). The workers agree
   on a step, checkpoint, rank 0 writes `attempt-N/stopped.json`, torchrun exits: the launcher returning is
   the wait for the stop, bounded by Slurm's kill (whose SIGTERM the Relay forwards to torchrun).
4. After a signal or an error, task 0 waits (at most NODE_EXIT_WAIT_S) for the other launchers, then calls
   submitit's handler, captured before launch() replaced it. It calls `checkpoint()`: `batch.decide_run`
   (same budgets, same events), then a fresh DelayedSubmission to requeue or None to finish. submitit then
   dumps the pickle, runs `scontrol requeue JOBID` (same id, SLURM_RESTART_COUNT+1) and exits, or raises
   UncompletedJobError (job FAILED). A plain completion is decided without submitit. A signal reaching task
   0 before the Relay is installed goes to submitit's handler directly: checkpoint() records it and decides.
submitit's own timeout budget (`max_num_timeout`) is set above the sum of ours, so ours always decide.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from ddpctl import batch, exitcodes, proc
from ddpctl.errors import BackendUnavailable, CommandError, DdpctlError
from ddpctl.events import append_event, read_events
from ddpctl.layout import RunLayout
from ddpctl.registry import JobRecord
from ddpctl.requeue import Decision
from ddpctl.rundir import commit, staging
from ddpctl.slurm import commands
from ddpctl.slurm.env import JOB_ID, PROCID
from ddpctl.spec import JobSpec, load_spec, time_to_seconds
from ddpctl.state import JobState
from ddpctl.status_sources import state_from_slurm

SUBMITIT_DIR = "submitit"
NODE_EXIT_WAIT_S = 30.0  # other nodes' launchers normally leave within a second of rank 0's stopped marker
POLL_S = 0.2


def executor_parameters(spec: JobSpec, run_base: Path) -> dict[str, Any]:
    """SlurmExecutor.update_parameters() keywords for the spec (pure)."""
    from ddpctl.render import shell_quote

    sig, lead = spec.requeue.signal, spec.requeue.lead_s
    extra: dict[str, Any] = {**dict(spec.sbatch), "hold": True, "open-mode": "append", "signal": f"{sig}@{lead}",
                             "output": str(run_base / "%j" / "slurm.out"),
                             "requeue" if spec.requeue.enabled else "no-requeue": True}
    seconds = time_to_seconds(spec.time) if spec.time else None
    exports = [*spec.env, ("SUBMITIT_PREEMPT_SIGNAL", sig)]  # the signal submitit's handler listens to
    params: dict[str, Any] = {
        "job_name": spec.name, "nodes": spec.nodes, "ntasks_per_node": 1, "signal_delay_s": lead,
        "stderr_to_stdout": True, "additional_parameters": extra,
        "setup": [*spec.setup, *(f"export {name}={shell_quote(value)}" for name, value in exports)],
        # submitit always writes --time (5 min by default) and needs minutes for its own bookkeeping.
        "time": math.ceil(seconds / 60) if seconds else 0,
    }
    if spec.time and seconds is None:
        extra["time"] = spec.time  # UNLIMITED / INFINITE as written
    optional = {"cpus_per_task": spec.cpus_per_task, "mem": spec.mem, "partition": spec.partition,
                "account": spec.account, "qos": spec.qos, "gpus_per_node": spec.gpus_per_node or None}
    params.update({key: value for key, value in optional.items() if value is not None})
    return params


def make_executor(spec: JobSpec, run_base: Path) -> Any:
    from submitit import SlurmExecutor

    from ddpctl.render import shell_quote

    class Executor(SlurmExecutor):
        def _make_submission_file_text(self, command: str, uid: str) -> str:
            text = super()._make_submission_file_text(command, uid)
            # No time in the spec means the partition's default, as with sbatch; submitit always writes one.
            return text if spec.time else "".join(
                line for line in text.splitlines(keepends=True) if not line.startswith("#SBATCH --time="))

    policy = spec.requeue
    executor = Executor(folder=run_base / "%j" / SUBMITIT_DIR, python=shell_quote(spec.python) if spec.python else None,
                        max_num_timeout=policy.max_preemptions + policy.max_timeouts + policy.max_failures + 1)
    executor.update_parameters(**executor_parameters(spec, run_base))
    return executor


def run_launcher(layout: RunLayout, env: dict[str, str]) -> int:
    """`ddpctl launch` in this process; an error becomes an exit status, as it would for a separate process."""
    from ddpctl.launch import launch

    try:
        return launch(layout.root, env)
    except DdpctlError as err:
        print(f"ddpctl launch: {err}", flush=True)
        return err.exit_code
    except Exception:  # task 0 must still get to the decision, as the batch shell would
        traceback.print_exc()
        return exitcodes.FAILURE


def squeue_time_left(job_id: str) -> int | None:
    try:
        done = proc.run(["squeue", "-h", "-j", job_id, "-o", "%L"], timeout=10)
    except CommandError:
        return None
    return batch.parse_time_left(done.stdout) if done.returncode == 0 else None


def wait_node_exits(layout: RunLayout, attempt: int, nodes: int, timeout: float) -> None:
    """Until every node's launcher logged its exit for this attempt, or the timeout passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = {e.get("node") for e in read_events(layout.events)
                  if e.get("event") == "node-exit" and e.get("attempt") == attempt}
        if len(exited) >= nodes:
            return
        time.sleep(POLL_S)


class Lead:
    """Global task 0's part: record the attempt, notice the stop, fan it out, decide."""

    def __init__(self, layout: RunLayout, env: dict[str, str]) -> None:
        self.layout, self.env = layout, env
        self.spec = batch.load_run_spec(layout)
        self.attempt = batch.attempt_of(env)
        self.signum = signal.Signals[f"SIG{self.spec.requeue.signal}"]
        self.exit_code: int | None = None  # this node's launcher status, once it returned
        self._lock, self._recorded = threading.Lock(), False

    def record_signal(self, *, force: bool = False) -> bool:
        """`batch.on_signal` once per attempt, as soon as any node saw the signal (or `force`: it is here)."""
        marks = [*(self.layout.stop_file(self.attempt, n) for n in range(self.spec.nodes)),
                 self.layout.stopped_marker(self.attempt)]
        with self._lock:
            if not self._recorded and (force or any(mark.exists() for mark in marks)):
                # No fan_out: Slurm already sent the signal to every node's task; the stop files cover the rest.
                batch.on_signal(self.layout, self.env, self.spec.requeue.signal,
                                lambda: squeue_time_left(self.env.get(JOB_ID, "")), lambda _name: None)
                self._recorded = True
            return self._recorded

    def watch(self, done: threading.Event) -> None:
        while not done.wait(POLL_S):
            if self.record_signal():
                return

    def run(self) -> int:
        batch.batch_start(self.layout, self.env)
        # submitit's checkpoint_and_try_requeue: launch() is about to replace it with the Relay's handler.
        hand_over = signal.getsignal(self.signum)
        done = threading.Event()
        watcher = threading.Thread(target=self.watch, args=(done,), name="ddpctl-stop-watch", daemon=True)
        watcher.start()
        try:
            self.exit_code = run_launcher(self.layout, self.env)
        finally:
            done.set()  # no join: record_signal's lock already orders the watcher's last call before ours
        if not self.record_signal() and self.exit_code == exitcodes.OK:
            self.decide()
            return exitcodes.OK
        wait_node_exits(self.layout, self.attempt, self.spec.nodes, NODE_EXIT_WAIT_S)
        if not callable(hand_over):
            raise RuntimeError(f"SIG{self.spec.requeue.signal} has no submitit handler: not run by submitit?")
        hand_over(self.signum, None)  # checkpoint() decides; submitit requeues and exits, or raises
        return self.exit_code

    def decide(self) -> Decision:
        if self.exit_code is None:
            self.record_signal(force=True)  # submitit's handler ran before the launcher: the signal is here
        code = exitcodes.FAILURE if self.exit_code is None else self.exit_code
        decision = batch.decide_run(self.layout, self.env, code)
        print(f"ddpctl: attempt {self.attempt} ended ({code}): {decision.action}: {decision.reason}", flush=True)
        return decision


_LEADS: dict[str, Lead] = {}  # task 0's Lead by run dir, kept out of the pickled callable (lock, thread)


class NodeRun:
    """Run by submitit once per node (see the module docstring); submitted as `NodeTask`, Checkpointable."""

    def __init__(self, run_base: str) -> None:
        self.run_base = run_base

    def layout(self, env: dict[str, str]) -> RunLayout:
        # Like the batch script: the run dir is <run_base>/<job id>, known only inside the job.
        return RunLayout(Path(self.run_base) / env[JOB_ID])

    def __call__(self) -> int:
        env = dict(os.environ)
        layout = self.layout(env)
        if env.get(PROCID, "0") != "0":
            code = run_launcher(layout, env)
            if code != exitcodes.OK:
                raise RuntimeError(f"ddpctl launch exited {code} (task {env.get(PROCID)}); task 0 decides")
            return code
        lead = _LEADS[str(layout.root)] = Lead(layout, env)
        return lead.run()

    def checkpoint(self, *_args: Any, **_kwargs: Any) -> Any:
        """Called by submitit on task 0: requeue (a fresh callable for the next run) or finish (None)."""
        from submitit.helpers import DelayedSubmission

        env = dict(os.environ)
        layout = self.layout(env)
        lead = _LEADS.get(str(layout.root)) or Lead(layout, env)
        if lead.decide().action != "requeue":
            return None
        return DelayedSubmission(type(self)(self.run_base))


def __getattr__(name: str) -> Any:
    """`NodeTask` is built on first use so that importing this module does not import submitit."""
    if name != "NodeTask":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from submitit.helpers import Checkpointable

    # By name, so cloudpickle pickles instances by reference and the task rebuilds the class the same way.
    node_task = type("NodeTask", (NodeRun, Checkpointable), {"__module__": __name__, "__qualname__": "NodeTask"})
    globals()["NodeTask"] = node_task
    return node_task


def adopt_submitit_folder(stage: RunLayout, run_base: Path, job_id: str) -> None:
    """Move what submitit created under <run_base>/<job id>/ into the staging dir (the job is still held)."""
    made = run_base / job_id
    (made / SUBMITIT_DIR).rename(stage.root / SUBMITIT_DIR)
    made.rmdir()
    # submitit leaves a symlink to the script next to the run dirs: not a run, so not kept there.
    for link in run_base.glob(".submission_file_*.sh"):
        if link.is_symlink() and str(link.readlink()).startswith(str(made) + os.sep):
            link.unlink()


class SubmititBackend:
    name = "submitit"

    def __init__(self, runner: proc.Runner = proc.run) -> None:
        self.runner = runner

    def check_available(self) -> None:
        if importlib.util.find_spec("submitit") is None:
            raise BackendUnavailable("backend submitit: the submitit package is not importable here; "
                                     "pip install submitit, or use --backend sbatch or --backend local")
        if not (proc.available("sbatch") and proc.available("srun")):
            raise BackendUnavailable("backend submitit: sbatch/srun are not on PATH (not a Slurm login node?); "
                                     "run without Slurm with --backend local")

    def submit(self, spec: JobSpec, spec_path: Path) -> JobRecord:
        self.check_available()
        run_base = spec.run_base.resolve()
        with staging(spec, None) as stage:
            try:
                job_id = str(make_executor(spec, run_base).submit(__getattr__("NodeTask")(str(run_base))).job_id)
            except (RuntimeError, ValueError, OSError) as err:  # submitit's FailedJobError is a RuntimeError
                raise CommandError(f"backend submitit: submission failed: {' '.join(str(err).split())}") from err
            try:
                adopt_submitit_folder(stage, run_base, job_id)
                layout = commit(stage, spec, job_id)
                commands.release(job_id, self.runner)
            except (OSError, CommandError):
                self.runner(["scancel", job_id])
                raise
        append_event(layout.events, "submit", job_id=job_id, backend=self.name, spec=str(spec_path))
        return JobRecord(job_id=job_id, name=spec.name, run_dir=str(layout.root), backend=self.name,
                         submitted_at=time.time(), spec_path=str(spec_path))

    def state(self, record: JobRecord) -> JobState:
        return state_from_slurm(record, self.runner)

    def cancel(self, record: JobRecord) -> None:
        commands.scancel(record.job_id, runner=self.runner)

    def preempt(self, record: JobRecord, kind: str) -> None:
        layout = RunLayout(Path(record.run_dir))
        spec = load_spec(layout.spec_file, check_paths=False)
        layout.preempt_request.write_text(json.dumps({"kind": kind, "t": time.time()}))
        # How Slurm delivers a submitit job's warning (--signal=SIG@T, no B:): to the step tasks on every node.
        commands.scancel(record.job_id, f"--signal={spec.requeue.signal}", runner=self.runner)


BACKEND = SubmititBackend()
