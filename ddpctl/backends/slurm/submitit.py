"""`--backend submitit`: submitit writes and submits the batch script; the rest is the sbatch backend's.

Same run dir, registry record, events, launcher and requeue decision. submitit is imported inside functions
only. One task per node runs `NodeTask()`, which calls `ddpctl.node.launch.launch` in-process. submitit's folder
is `<run dir>/submitit/`, which it creates under `<run_base>/<job id>/` itself: the job is submitted held,
the folder moved into the staging dir, that renamed to the run dir, and then the job released.

How the stop signal flows (submitit 1.5: core/job_environment.py, core/submission.py, slurm/slurm.py):
1. `--signal=SIG@lead_s` without `B:`: the time-limit warning, the preemption user signal and `ddpctl
   preempt` (`scancel --signal=SIG JOBID`) reach the step tasks on every node, not the batch shell.
2. Each task installs submitit's `checkpoint_and_try_requeue` for SIG (SUBMITIT_PREEMPT_SIGNAL is exported)
   before calling `NodeTask()`; `launch()` then installs its Relay for SIG and the last one wins: while the
   launcher runs, the Relay takes SIG on every node (touches its stop file; torchrun and workers ignore SIG).
3. On global task 0 a watcher thread sees the first stop file and runs `batch.on_signal` (the `signal`
   event and its kind; every node's stop file, for a launcher not listening yet). The ranks agree on a step,
   checkpoint, rank 0 writes `attempt-N/stopped.json`, torchrun exits: the launcher returning is the wait
   for the stop, bounded by Slurm's kill (whose SIGTERM the Relay forwards to torchrun).
4. After a signal or an error, task 0 waits (at most NODE_EXIT_WAIT_S) for the other launchers, then calls
   submitit's handler (captured before launch() replaced it), which calls `checkpoint()`: `batch.decide_run`
   (same budgets and events), then a fresh DelayedSubmission to requeue or None to finish. submitit then
   dumps the pickle, runs `scontrol requeue JOBID` (same id, next SLURM_RESTART_COUNT) and exits, or raises
   UncompletedJobError (FAILED). A plain completion is decided without submitit. SIG reaching task 0 before
   the Relay is installed goes to submitit's handler directly: checkpoint() records it and decides at once.
   submitit's own budget (`max_num_timeout`) is set above the sum of ours, so ours always decide.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpctl import exitcodes, proc
from ddpctl.backends import note_submitted, submitted_record
from ddpctl.backends.slurm.jobs import SlurmJobs
from ddpctl.backends.slurm.sbatch import BACKEND as SBATCH
from ddpctl.errors import BackendUnavailable, CommandError
from ddpctl.node import batch
from ddpctl.node.decide import Decision
from ddpctl.run import history
from ddpctl.run.history import NodeExited
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord
from ddpctl.run.rundir import commit, run_spec, staging
from ddpctl.slurm import commands
from ddpctl.slurm.env import JOB_ID, PROCID
from ddpctl.spec import JobSpec, capabilities

if TYPE_CHECKING:  # `status` and `cancel` need no plan
    from ddpctl.plan.submission import SubmissionPlan
    from ddpctl.spec.sweepload import Sweep as LoadedSweep

NODE_EXIT_WAIT_S = 30.0  # other nodes' launchers normally leave within a second of rank 0's stopped marker
POLL_S = 0.2


def make_executor(spec: JobSpec, run_base: Path, scripts: list[Path], parameters: dict[str, Any]) -> Any:
    """submitit's executor with exactly `parameters` (the plan's `executor_parameters()`)."""
    from submitit import SlurmExecutor

    class Executor(SlurmExecutor):
        def _make_submission_command(self, submission_file_path: Path) -> list[str]:
            scripts.append(submission_file_path)  # its temporary script, next to the run dirs
            return super()._make_submission_command(submission_file_path)

        def _make_submission_file_text(self, command: str, uid: str) -> str:
            text = super()._make_submission_file_text(command, uid)
            # No time in the spec means the partition's default, as with sbatch; submitit always writes one.
            return (
                text
                if spec.time
                else "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#SBATCH --time="))
            )

    policy = spec.requeue
    budgets = policy.max_preemptions + policy.max_timeouts + policy.max_failures + policy.max_node_failures
    # Tasks run submitit and ddpctl with this interpreter (it has both); the workers use spec.python. `-P` (3.11+):
    # a folder named ddpctl/ in the submit dir (the clone) must not shadow the installed package when unpickling.
    python = shlex.quote(sys.executable) + (" -P" if sys.version_info >= (3, 11) else "")
    executor = Executor(folder=RunLayout(run_base / "%j").submitit_dir, max_num_timeout=budgets + 1, python=python)
    executor.update_parameters(**parameters)
    return executor


def run_launcher(layout: RunLayout, env: dict[str, str]) -> int:
    """`ddpctl launch` in this process; an error becomes an exit status, as it would for a separate process."""
    from ddpctl.node.launch import launch

    try:
        return launch(layout.root, env)
    except Exception:  # task 0 must still get to the decision, as the batch shell would
        traceback.print_exc()
        return exitcodes.FAILURE


def squeue_time_left(job_id: str) -> int | None:
    with contextlib.suppress(CommandError):  # squeue missing: the time left is unknown
        return batch.parse_time_left(commands.time_left(job_id))
    return None


def wait_node_exits(layout: RunLayout, attempt: int, nodes: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = {e.node for e in history.load(layout.events).attempt(attempt).all(NodeExited)}
        if len(exited) >= nodes:
            return
        time.sleep(POLL_S)


class Lead:
    """Global task 0's part: record the attempt, notice the stop, fan it out, decide."""

    def __init__(self, layout: RunLayout, env: dict[str, str]) -> None:
        self.layout, self.env = layout, env
        self.spec = run_spec(layout)
        self.attempt = batch.attempt_of(env)
        self.signum = proc.signal_named(self.spec.requeue.signal)
        self.exit_code: int | None = None  # this node's launcher status, once it returned
        self._lock, self._recorded = threading.Lock(), False

    def record_signal(self, *, force: bool = False) -> bool:
        """`batch.on_signal` once per attempt, as soon as any node saw the signal (or `force`: it is here)."""
        layout, attempt = self.layout, self.attempt
        marks = [layout.stopped_marker(attempt), *(layout.stop_file(attempt, n) for n in range(self.spec.nodes))]
        with self._lock:
            if not self._recorded and (force or any(mark.exists() for mark in marks)):
                # No fan_out: Slurm already sent the signal to every node's task; the stop files cover the rest.
                batch.on_signal(
                    self.layout,
                    self.env,
                    self.spec.requeue.signal,
                    lambda: squeue_time_left(self.env.get(JOB_ID, "")),
                    lambda _name: None,
                )
                self._recorded = True
            return self._recorded

    def watch(self, done: threading.Event) -> None:
        while not (done.wait(POLL_S) or self.record_signal()):
            pass

    def run(self) -> int:
        batch.batch_start(self.layout, self.env)
        # submitit's checkpoint_and_try_requeue: launch() is about to replace it with the Relay's handler.
        hand_over = signal.getsignal(self.signum)
        done = threading.Event()
        threading.Thread(target=self.watch, args=(done,), name="ddpctl-stop-watch", daemon=True).start()
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
        decision = batch.decide_run(self.layout, self.env, code, in_slurm_job=True)
        print(f"ddpctl: attempt {self.attempt} ended ({code}): {decision.action}: {decision.reason}", flush=True)
        return decision


_LEADS: dict[str, Lead] = {}  # task 0's Lead by run base, kept out of the pickled callable (lock, thread)


class NodeRun:
    """Run by submitit once per node (see the module docstring); submitted as `NodeTask`, Checkpointable."""

    def __init__(self, run_base: str, submission: str = "") -> None:
        self.run_base, self.submission = run_base, submission  # submission: the staging dir's unique name

    def layout(self, env: dict[str, str]) -> RunLayout:
        return RunLayout(Path(self.run_base) / env[JOB_ID])  # as in the batch script: known inside the job only

    def __call__(self) -> int:
        env = dict(os.environ)
        layout = self.layout(env)
        if env.get(PROCID, "0") != "0":
            code = run_launcher(layout, env)
            if code != exitcodes.OK:
                raise RuntimeError(f"ddpctl launch exited {code} (task {env.get(PROCID)}); task 0 decides")
            return code
        lead = _LEADS[self.run_base] = Lead(layout, env)
        return lead.run()

    def checkpoint(self, *_args: Any, **_kwargs: Any) -> Any:
        """Called by submitit on task 0: requeue (a fresh callable for the next run) or finish (None)."""
        from submitit.helpers import DelayedSubmission

        env = dict(os.environ)
        lead = _LEADS.get(self.run_base) or Lead(self.layout(env), env)
        if lead.decide().action != "requeue":
            return None
        return DelayedSubmission(type(self)(self.run_base, self.submission))


def __getattr__(name: str) -> Any:
    """`NodeTask` is built on first use so that importing this module does not import submitit."""
    if name != "NodeTask":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from submitit.helpers import Checkpointable

    # By name, so cloudpickle pickles instances by reference and the task rebuilds the class the same way.
    node_task = type("NodeTask", (NodeRun, Checkpointable), {"__module__": __name__, "__qualname__": "NodeTask"})
    globals()["NodeTask"] = node_task
    return node_task


class SubmititBackend(SlurmJobs):
    capabilities = capabilities.of("submitit")  # its row of the one table
    name = capabilities.name
    preempt_delivery = ()  # submitit uses --signal=SIG@T without B:: Slurm signals every step task

    def check_available(self) -> None:
        try:
            import submitit  # noqa: F401 - importable, not just present: a broken install fails here
        except ImportError:
            raise BackendUnavailable(
                "backend submitit: the submitit package is not importable here; "
                "pip install submitit, or use --backend sbatch or --backend local"
            ) from None
        self.require_commands("sbatch", "srun")

    # Its sweeps are job arrays of the sbatch backend's batch script (ddpctl.plan.sweep plans them so), whose
    # tasks are sbatch jobs.
    sweep_kind = SBATCH.sweep_kind

    def check_sweep(self, name: str, tasks: int) -> None:
        SBATCH.check_sweep(name, tasks)

    def submit_sweep(
        self, loaded: LoadedSweep, spec_path: Path, add_records: Callable[[list[JobRecord]], None]
    ) -> list[JobRecord]:
        return SBATCH.submit_sweep(loaded, spec_path, add_records)

    def cancel_sweep(self, array_job: str, records: list[JobRecord]) -> None:
        SBATCH.cancel_sweep(array_job, records)

    def submit(self, plan: SubmissionPlan, spec_path: Path) -> JobRecord:
        """Submit through submitit with exactly the plan's executor parameters (held), commit, release."""
        self.check_available()
        spec = plan.spec
        run_base = spec.run_base.resolve()
        with staging(spec, None) as stage:
            job_id = submit_held(plan, run_base, stage.root.name)
            try:  # submitit made <run_base>/<job id>/submitit/ itself: into the staging dir with it first
                RunLayout(run_base / job_id).submitit_dir.rename(stage.submitit_dir)
                (run_base / job_id).rmdir()
                layout = commit(stage, spec, job_id)
                commands.release(job_id, self.runner)
            except (OSError, CommandError):
                commands.scancel_unchecked(job_id, self.runner)
                raise
        note_submitted(layout.events, job_id, self.name, spec_path)
        return submitted_record(layout, spec, job_id, self.name, spec_path)


def submit_held(plan: SubmissionPlan, run_base: Path, token: str) -> str:
    # submitit leaves its script next to the run dirs (a symlink once submitted), and its pickle on failure.
    scripts: list[Path] = []
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # submitit echoes sbatch's errors; one line is ours
            executor = make_executor(plan.spec, run_base, scripts, plan.executor_parameters())
            job = executor.submit(__getattr__("NodeTask")(str(run_base), token))
        return str(job.job_id)
    except (RuntimeError, ValueError, OSError) as err:  # submitit's FailedJobError is a RuntimeError
        for path in run_base.glob("*.pkl"):
            if token.encode() in path.read_bytes():
                path.unlink()
        detail = (str(err).strip().splitlines() or [type(err).__name__])[-1]
        raise CommandError(f"backend submitit: sbatch failed: {detail}") from err
    finally:
        for script in scripts:
            script.unlink(missing_ok=True)


BACKEND = SubmititBackend()
