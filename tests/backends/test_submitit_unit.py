"""The submitit backend without a cluster: parameter mapping, the script submitit writes, the pickled callable,
the requeue decision in `checkpoint()`, and the one-line "unavailable" errors."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from clitools import events as records
from stubtools import on_path, write_command

from ddpctl.backends.slurm import submitit as sb
from ddpctl.plan.executor import executor_parameters
from ddpctl.run import history
from ddpctl.run.history import Decided
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, RequeuePolicy, spec_to_mapping

REPO = Path(__file__).resolve().parents[2]


def make_spec(tmp_path: Path, **fields: object) -> JobSpec:
    base: dict[str, object] = {
        "name": "job",
        "script": "train.py",
        "nodes": 2,
        "nproc_per_node": 2,
        "run_dir": str(tmp_path / "runs"),
    }
    return JobSpec(**{**base, **fields})  # type: ignore[arg-type]


@pytest.fixture
def fake_srun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """submitit's SlurmExecutor only checks that srun is on PATH; nothing here runs it."""
    monkeypatch.setenv("PATH", on_path(write_command(tmp_path / "bin", "srun").parent))


@pytest.mark.parametrize(
    ("time", "minutes"), [("1:30:00", 90), ("10", 10), ("0:30", 1), ("1-00:00:00", 1440), ("UNLIMITED", 0), (None, 0)]
)
def test_time_in_minutes(tmp_path: Path, time: str | None, minutes: int) -> None:
    params = executor_parameters(make_spec(tmp_path, time=time), tmp_path)
    assert params["time"] == minutes


def test_parameters_mirror_the_sbatch_backend(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        partition="debug",
        mem="4G",
        cpus_per_task=4,
        gpus_per_node=2,
        nproc_per_node=2,
        sbatch=(("constraint", "a100"), ("exclusive", True)),
        env=(("A", "x y"),),
        setup=("module load cuda",),
        requeue=RequeuePolicy(signal="USR1", lead_s=300),
    )
    params = executor_parameters(spec, Path("/base"))
    assert {
        k: params[k]
        for k in ("nodes", "ntasks_per_node", "partition", "mem", "cpus_per_task", "gpus_per_node", "signal_delay_s")
    } == {
        "nodes": 2,
        "ntasks_per_node": 1,
        "partition": "debug",
        "mem": "4G",
        "cpus_per_task": 4,
        "gpus_per_node": 2,
        "signal_delay_s": 300,
    }
    assert params["additional_parameters"] == {
        "constraint": "a100",
        "exclusive": True,
        "hold": True,
        "open-mode": "append",
        "signal": "USR1@300",
        "output": "/base/%j/slurm.out",
        "requeue": True,
    }
    assert params["setup"] == ["module load cuda", "export A='x y'", "export SUBMITIT_PREEMPT_SIGNAL=USR1"]
    assert "account" not in params and "qos" not in params


def test_requeue_disabled_means_no_requeue(tmp_path: Path) -> None:
    params = executor_parameters(make_spec(tmp_path, requeue=RequeuePolicy(enabled=False)), tmp_path)
    assert params["additional_parameters"]["no-requeue"] is True
    assert "requeue" not in params["additional_parameters"]


@pytest.mark.usefixtures("fake_srun")
@pytest.mark.parametrize(
    ("time", "line"), [("00:10:00", "#SBATCH --time=10"), ("UNLIMITED", "#SBATCH --time=0"), (None, None)]
)
def test_script_submitit_writes(tmp_path: Path, time: str | None, line: str | None) -> None:
    spec = make_spec(tmp_path, time=time, requeue=RequeuePolicy(lead_s=60, max_preemptions=4, max_timeouts=2))
    executor = sb.make_executor(spec, tmp_path / "base", [], executor_parameters(spec, tmp_path / "base"))
    lines = executor._make_submission_file_text("CMD", "uid").splitlines()
    for expected in (
        "#SBATCH --hold",
        "#SBATCH --signal=USR2@60",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --open-mode=append",
        "#SBATCH --requeue",
        "export SUBMITIT_PREEMPT_SIGNAL=USR2",
        f"#SBATCH --output={tmp_path}/base/%j/slurm.out",
    ):
        assert expected in lines
    assert [x for x in lines if x.startswith("#SBATCH --time=")] == ([line] if line else [])
    assert not [x for x in lines if x.startswith("#SBATCH --error")]
    # above the sum of our budgets (preemptions, timeouts, failures, node failures): ours decide
    assert executor.max_num_timeout == 4 + 2 + 0 + 5 + 1


def test_node_task_is_checkpointable_and_pickles_by_reference() -> None:
    from submitit.helpers import Checkpointable

    task = sb.NodeTask("/runs/job", "token")
    assert isinstance(task, Checkpointable) and isinstance(task, sb.NodeRun)
    data = pickle.dumps(task)
    code = (
        "import pickle, sys; t = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(t).__module__, type(t).__qualname__, t.run_base, t.submission)"
    )
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, check=True)
    assert done.stdout.decode().split() == ["ddpctl.backends.slurm.submitit", "NodeTask", "/runs/job", "token"]


def run_dir_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: RequeuePolicy) -> RunLayout:
    spec = make_spec(tmp_path, requeue=policy)
    layout = RunLayout(spec.run_base / "42")
    layout.root.mkdir(parents=True)
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec)))
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no squeue: the time left is unknown
    return layout


def test_checkpoint_requeues_within_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = run_dir_for(tmp_path, monkeypatch, RequeuePolicy(max_preemptions=2))
    layout.preempt_request.write_text(json.dumps({"kind": "timeout", "t": time.time()}))
    delayed = sb.NodeTask(str(layout.root.parent)).checkpoint()
    assert type(delayed.function).__name__ == "NodeTask" and delayed.function.run_base == str(layout.root.parent)
    events = list(records(layout.root))
    assert [(e["event"], e.get("kind")) for e in events] == [("signal", "timeout"), ("decision", "timeout")]
    assert events[1]["action"] == "requeue" and events[1]["attempt"] == 1
    assert all(layout.stop_file(1, n).exists() for n in range(2))  # the fan-out to both nodes


def test_checkpoint_finishes_when_the_budget_is_spent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = run_dir_for(tmp_path, monkeypatch, RequeuePolicy(max_preemptions=1))
    history.append(layout.events, Decided(attempt=0, action="requeue", kind="preemption"))
    assert sb.NodeTask(str(layout.root.parent)).checkpoint() is None
    last = list(records(layout.root))[-1]
    assert (last["action"], last["kind"]) == ("finish", "preemption")
    assert last["reason"] == "preemption budget spent: 1 of max_preemptions=1 requeues used"


def cli(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "ddpctl",
        "submit",
        "jobs/example.yaml",
        "--backend",
        "submitit",
        "--set",
        f"run_dir={tmp_path / 'runs'}",
    ]
    return subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "DDPCTL_HOME": str(tmp_path / "home"), **env},
    )


def test_unavailable_without_submitit(tmp_path: Path) -> None:
    broken = tmp_path / "site" / "submitit"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('not installed here')\n")
    done = cli(tmp_path, PYTHONPATH=f"{tmp_path / 'site'}{os.pathsep}{REPO}")
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "pip install submitit" in done.stderr and "--backend local" in done.stderr


def test_unavailable_without_sbatch(tmp_path: Path) -> None:
    done = cli(tmp_path, PATH=str(tmp_path / "empty"))
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "sbatch" in done.stderr and "--backend local" in done.stderr
    assert not (tmp_path / "runs").exists()
