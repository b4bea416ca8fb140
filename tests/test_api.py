"""The Python API without a scheduler: light import, spec loading, plans, typed errors (the CLI's own lines).

The API driving real jobs on the local backend is in tests/integration/test_api_local.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ddpctl
from ddpctl import api
from ddpctl.errors import ArgumentError, DdpctlError, JobNotFound, SpecError

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
    assert spec.script == str(ROOT / "jobs/example/train.py")  # written in the file: from the file's directory


def test_overrides_may_be_a_mapping_of_typed_values(tmp_path: Path) -> None:
    given = {"nodes": 4, "name": "007", "args": ["--lr", "0.1"], "health.hang_timeout_s": 30, "env.TAG": "on"}
    spec = ddpctl.load_spec(ROOT / "jobs" / "example.yaml", given, cwd=tmp_path)
    # "007" stays the string it was (as a --set word it would be read as the number 7).
    assert (spec.nodes, spec.name, spec.args, spec.health.hang_timeout_s) == (4, "007", ("--lr", "0.1"), 30)
    assert dict(spec.env)["TAG"] == "on"
    assert ddpctl.load_spec(ROOT / "jobs" / "example.yaml", "nodes=3").nodes == 3  # one string: one override
    with pytest.raises(SpecError, match="nodez"):
        ddpctl.load_spec(ROOT / "jobs" / "example.yaml", {"nodez": 4})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"nodes": float("nan")}, "overrides: nodes: nan is not a spec value"),
        ({1: 2}, "overrides: key 1 is a int; keys are spec keys like 'nodes'"),
        ({"nodes": object}, "overrides: nodes: <class 'object'> is not a spec value"),
        (5, "overrides: got int; expected a mapping of spec keys to values or a list of 'KEY=VALUE' strings"),
        (["nodes=2", 3], "overrides: got list; expected"),
    ],
)
def test_bad_overrides_are_typed_errors(given: object, message: str) -> None:
    with pytest.raises(ArgumentError) as caught:
        ddpctl.load_spec(ROOT / "jobs" / "example.yaml", given)  # type: ignore[arg-type]
    assert str(caught.value).startswith(message)


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


@pytest.mark.parametrize("remote", [False, True])
def test_preempt_kind_is_checked_before_anything_is_asked(tmp_path: Path, remote: bool) -> None:
    from ddpctl.api.remote import RemoteJob
    from ddpctl.run.registry import JobRecord

    record = JobRecord("local-1", "x", str(tmp_path), "local", 0.0)
    job = RemoteJob(record, "nowhere") if remote else api.Job(record)  # no cluster `nowhere`: no ssh is tried
    with pytest.raises(DdpctlError, match="preempt kind: got 'later', expected preemption or timeout"):
        job.preempt("later")


class Polled:
    """A state function (our own seam) that counts its polls and never reaches a terminal state."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, _record: object) -> object:
        from ddpctl.run.state import JobState

        self.calls += 1
        return JobState("RUNNING", 0)


def running_job(tmp_path: Path) -> tuple[api.Job, Polled]:
    from ddpctl.run.registry import JobRecord

    polled = Polled()
    return api.Job(JobRecord("local-1", "x", str(tmp_path), "local", 0.0), state_fn=polled), polled  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timeout": float("nan")}, "timeout: got nan; expected a number of seconds >= 0"),
        ({"timeout": -1}, "timeout: got -1; expected a number of seconds >= 0"),
        ({"timeout": "10"}, "timeout: got '10'; expected a number of seconds or None"),
        ({"timeout": 1, "poll_s": -1}, "poll_s: got -1; expected a number of seconds >= 0"),
        ({"timeout": 1, "poll_s": float("nan")}, "poll_s: got nan; expected a number of seconds >= 0"),
        ({"timeout": 1, "poll_s": None}, "poll_s: got None; expected a number of seconds"),
        ({"timeout": True}, "timeout: got True; expected a number of seconds or None"),
    ],
)
def test_wait_arguments_are_typed_errors(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    from ddpctl.errors import ArgumentError

    job, polled = running_job(tmp_path)
    with pytest.raises(ArgumentError) as caught:
        job.wait(**kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert isinstance(caught.value, DdpctlError) and isinstance(caught.value, ValueError)
    assert polled.calls == 0  # refused before the first poll


def test_wait_polls_no_faster_than_the_floor(tmp_path: Path) -> None:
    from ddpctl.errors import WaitTimeout

    job, polled = running_job(tmp_path)
    with pytest.raises(WaitTimeout):
        job.wait(timeout=1.0, poll_s=0)
    # poll_s=0 used to poll thousands of times a second; the floor (0.2 s) allows ~6 polls in 1 s.
    assert 2 <= polled.calls <= 1.0 / api.MIN_POLL_S + 2, polled.calls


def test_job_by_a_non_string_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddpctl.errors import ArgumentError

    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path))
    with pytest.raises(ArgumentError, match=r"job: got int 123; expected a job id or name as a string"):
        ddpctl.job(123)  # type: ignore[arg-type]
    assert issubclass(ddpctl.ArgumentError, TypeError)


def test_an_ambiguous_name_is_never_said_on_stderr_by_the_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import os

    from ddpctl.backends.local import processes as local_proc
    from ddpctl.run.registry import JobRecord, Registry

    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    held = []
    for n in (1, 2):  # two live local jobs of one name: each run dir's lock held (here, by this process)
        run_dir = tmp_path / f"local-{n}"
        run_dir.mkdir()
        held.append(local_proc.take_lock(run_dir))
        Registry.from_env().add(JobRecord(f"local-{n}", "ex", str(run_dir), "local", float(n)))
    try:
        said: list[str] = []
        assert ddpctl.job("ex").job_id == "local-2"
        assert capfd.readouterr().err == ""
        assert api.job("ex", warn=said.append).job_id == "local-2"
        assert len(said) == 1 and "name 'ex' has 2 jobs; using job local-2" in said[0], said
    finally:
        for fd in held:
            os.close(fd)


@pytest.mark.parametrize(
    ("axes", "words"),
    [
        (None, []),
        ({"env.LR": [1e-3, 3e-4]}, ["env.LR=0.001,0.0003"]),
        ({"nodes": [1, 2], "name": ["a,b", "c"]}, ["nodes=1,2", 'name="a,b","c"']),  # a comma inside stays one value
        ({"args": [["--a", "1"], ["--b"]]}, ['args=["--a", "1"],["--b"]']),
    ],
)
def test_sweep_axes_as_grid_words(axes: dict[str, list[object]] | None, words: list[str]) -> None:
    from ddpctl.api.sweeps import axis_words

    assert axis_words("grid", axes) == words


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        (["env.LR=1,2"], "grid: got list; expected a mapping of spec keys to lists of values"),
        ({"env.LR": "1,2"}, "grid: env.LR: got '1,2'; expected a list of values"),
        ({"env.LR": [float("nan")]}, "grid: env.LR: [nan] holds a value that is not a spec value"),
    ],
)
def test_bad_sweep_axes_are_typed_errors(axes: object, message: str) -> None:
    from ddpctl.api.sweeps import axis_words

    with pytest.raises(ArgumentError) as err:
        axis_words("grid", axes)  # type: ignore[arg-type]
    assert str(err.value).startswith(message)


def test_a_sweep_point_is_checked_like_a_set_before_anything_is_submitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    with pytest.raises(SpecError, match="nodes"):
        ddpctl.sweep(ROOT / "jobs" / "example.yaml", grid={"nodes": [2, "many"]})
    assert not (tmp_path / "home").exists()


def test_a_sweep_with_a_cluster_is_refused_not_run_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    with pytest.raises(
        ArgumentError,
        match=r"example.yaml: cluster: 'gpu': ddpctl.sweep runs a sweep here only; `ddpctl sweep` runs it",
    ):
        ddpctl.sweep(ROOT / "jobs" / "example.yaml", grid={"nodes": [1, 2]}, overrides=["cluster=gpu"])
    assert not (tmp_path / "home").exists()
