"""Run the real `ddpctl` CLI as a subprocess with its own registry (DDPCTL_HOME) — no in-process shortcuts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
STATUSWAIT = Path(__file__).resolve().parent / "statuswait.py"
EXAMPLE_SCRIPT = REPO / "jobs" / "example" / "train.py"
EXAMPLE_ARGS = ("--epochs", "2", "--samples", "1024", "--ckpt-every", "2")  # a few seconds on CPU, 4 checkpoints
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "BUDGET_SPENT", "NODE_FAIL", "OUT_OF_MEMORY"}

ALLREDUCE_SCRIPT = """
import json, os, socket, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("RESULT " + json.dumps({"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item(),
      "group_rank": int(os.environ["GROUP_RANK"]), "host": socket.gethostname(),
      "master_addr": os.environ["MASTER_ADDR"]}), flush=True)
dist.destroy_process_group()
"""


class Cli:
    def __init__(self, home: Path, cwd: Path = REPO, extra_env: dict[str, str] | None = None) -> None:
        self.home, self.cwd = home, cwd
        self.env = {**os.environ, "DDPCTL_HOME": str(home), **(extra_env or {})}

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "ddpctl", *args],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"ddpctl {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def submit(self, spec: Path, *options: str) -> tuple[str, Path]:
        out = self.run("submit", str(spec), *options).stdout
        job_id = out.split("job ", 1)[1].split()[0]
        run_dir = Path(out.split("run dir:", 1)[1].split()[0])
        return job_id, run_dir

    def status(self, job: str) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.run("status", job, "--json").stdout)
        return result

    def wait_terminal(self, job: str, timeout: float = 240) -> dict[str, Any]:
        """Polls `status --json` once a second in one interpreter (tests/statuswait.py): a `python -m ddpctl` per
        poll cost ~0.3 s of CPU each, taken from the job under test on CI's 2 cores."""
        done = subprocess.run(
            [sys.executable, str(STATUSWAIT), job, str(timeout), *sorted(TERMINAL)],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout + 120,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"job {job} not finished after {timeout} s: {done.stdout}{done.stderr}")
        status: dict[str, Any] = json.loads(done.stdout)
        return status

    def wait_for(self, predicate: Any, timeout: float = 120, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def ddpctl_in(cwd: Path, env: Mapping[str, str], timeout: float = 120) -> Callable[..., CompletedProcess[str]]:
    """`python -m ddpctl ARGS` run in `cwd` with exactly `env` (nothing inherited: no Slurm on PATH, no stray
    DDPCTL_* variables), its failure left to the caller to check."""

    def ddpctl(*args: str) -> CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ddpctl", *args],
            capture_output=True,
            text=True,
            env=dict(env),
            cwd=cwd,
            timeout=timeout,
            check=False,
        )

    return ddpctl


def write_spec(path: Path, **fields: Any) -> Path:
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def example_spec(
    tmp_path: Path,
    name: str,
    *extra: str,
    script: Path = EXAMPLE_SCRIPT,
    run_dir: str | None = None,
    backend: str = "local",
    **fields: Any,
) -> Path:
    """The example job (2 nodes x 2 ranks on CPU, EXAMPLE_ARGS then `extra`) as <tmp_path>/<name>.yaml; its runs
    go under <tmp_path>/runs unless `run_dir` says otherwise."""
    return write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        script=str(script),
        args=[*EXAMPLE_ARGS, *extra],
        nodes=2,
        nproc_per_node=2,
        run_dir=run_dir or str(tmp_path / "runs"),
        env={"OMP_NUM_THREADS": "1"},
        backend=backend,
        **fields,
    )


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def results(run_dir: Path, attempt: int = 0) -> list[dict[str, Any]]:
    found = []
    for log in sorted((run_dir / f"attempt-{attempt}").glob("rank-*.log")):
        found += [json.loads(line[7:]) for line in log.read_text().splitlines() if line.startswith("RESULT ")]
    return found


def final_hash(run_dir: Path) -> str | None:
    for log in sorted(run_dir.glob("attempt-*/rank-0.log"), reverse=True):
        for line in log.read_text().splitlines():
            if line.startswith("final-weights-sha256="):
                return line.split("=", 1)[1]
    return None


def checkout_at(spec: Any, root: Path) -> Any:
    """A JobSpec loaded from this checkout's jobs/ as if the checkout lay at `root` (golden files name a pretend
    checkout, so they do not depend on where the tests run)."""
    from ddpctl.spec.paths import path_values, with_values

    values = path_values(spec).items()
    return with_values(
        spec, {k: str(root / Path(v).relative_to(REPO)) for k, v in values if Path(v).is_relative_to(REPO)}
    )


def reached_step(attempt_dir: Path, step: int) -> bool:
    """Whether any rank's progress record in `attempt_dir` is at `step` or later (the fault tests' trigger)."""
    return any((json.loads(p.read_text()).get("step") or 0) >= step for p in attempt_dir.glob("progress-*.json"))


@dataclass(frozen=True)
class PreemptedTrainer:
    """A trainer's run on the local backend, preempted once mid-run and waited for (preempt_trainer)."""

    cli: Cli
    job_id: str
    status: dict[str, Any]
    run_dir: Path
    events: list[dict[str, Any]]
    info: str  # the events and the supervisor's output, for assertion messages


def preempt_trainer(
    tmp_path: Path, name: str, script_text: str, args: list[str], preset: str,
    *, ready: Callable[[Path], bool], timeout: float, backend: str = "local",
    fields: dict[str, Any] | None = None, submitted: Callable[[str], object] | None = None,
    requeue: dict[str, Any] | None = None,
) -> PreemptedTrainer:  # fmt: skip
    """Write `script_text`, run it 2 nodes x 2 ranks on `backend` (the local one unless said) with the resume
    `preset` and the spec's other `fields`, `ddpctl preempt` it once `ready(run_dir)` holds, and wait for its end
    (the HF Trainer and Lightning tests); `submitted` gets the job id at once (the cluster tests' cleanup);
    `requeue` replaces the spec's requeue section (a script without a stop handler wants a short lead time)."""
    cli = Cli(tmp_path / "home")
    script = tmp_path / f"{name}_train.py"
    script.write_text(script_text)
    spec = write_spec(
        tmp_path / f"{name}.yaml",
        name=name,
        script=str(script),
        args=args,
        nodes=2,
        nproc_per_node=2,
        run_dir=str(tmp_path / "runs"),
        backend=backend,
        resume={"preset": preset},
        requeue=requeue or {"lead_s": 60, "max_preemptions": 2},
        **(fields or {}),
    )
    job_id, run_dir = cli.submit(spec)
    if submitted is not None:
        submitted(job_id)
    cli.wait_for(lambda: ready(run_dir), timeout=timeout, what=f"{name} ready to preempt")
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=timeout + 100)
    found = events(run_dir)
    info = json.dumps(found, indent=1)[-6000:] + "\n" + (run_dir / "slurm.out").read_text()[-4000:]
    return PreemptedTrainer(cli, job_id, status, run_dir, found, info)
