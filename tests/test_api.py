"""The Python API without a scheduler: light import, spec loading, plans, typed errors (the CLI's own lines).

The API driving real jobs on the local backend is in tests/integration/test_api_local.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ddpctl
from ddpctl import api
from ddpctl.errors import DdpctlError, JobNotFound, SpecError

ROOT = Path(__file__).resolve().parents[1]


def test_import_ddpctl_is_light() -> None:
    code = "import sys, ddpctl; print(sorted(m for m in sys.modules if m.startswith('ddpctl')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['ddpctl']"


def test_the_api_is_reachable_from_the_package() -> None:
    assert ddpctl.submit is api.submit and ddpctl.job is api.job and ddpctl.Job is api.Job
    assert ddpctl.SpecError is SpecError
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = ddpctl.nope


def test_load_spec_applies_overrides_and_resolves_paths(tmp_path: Path) -> None:
    spec = ddpctl.load_spec(ROOT / "jobs" / "example.yaml", ["nodes=3", "run_dir=out"], cwd=tmp_path)
    assert (spec.nodes, spec.run_dir) == (3, str(tmp_path / "out"))
    assert spec.script == str(tmp_path / "jobs/example/train.py")  # relative to cwd, as `ddpctl submit` does


def test_errors_are_the_clis_one_line_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    with pytest.raises(SpecError) as caught:
        ddpctl.load_spec("jobs/example.yaml", ["nodes=0"])
    done = subprocess.run(
        [sys.executable, "-m", "ddpctl", "render", "jobs/example.yaml", "--set", "nodes=0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (2, f"ddpctl: error: {caught.value}\n")


def test_a_spec_object_takes_overrides_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    spec = ddpctl.load_spec("jobs/example.yaml")
    plan = api.plan(spec, backend="local", overrides=["nodes=3"])
    assert (plan.backend, plan.spec.nodes, len(plan.nodes)) == ("local", 3, 3)
    assert [n.dist.node_name for n in plan.nodes] == ["local1", "local2", "local3"]
    with pytest.raises(SpecError, match="nodes"):
        api.plan(spec, overrides=["nodes=-1"])


def test_unknown_job_and_empty_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path))
    with pytest.raises(JobNotFound, match="no jobs in the registry"):
        ddpctl.job()
    assert ddpctl.jobs() == []
    with pytest.raises(JobNotFound, match="'nope'"):
        ddpctl.job("nope")


def test_preempt_kind_is_checked(tmp_path: Path) -> None:
    from ddpctl.run.registry import JobRecord

    job = api.Job(JobRecord("local-1", "x", str(tmp_path), "local", 0.0))
    with pytest.raises(DdpctlError, match="expected preemption or timeout"):
        job.preempt("later")
