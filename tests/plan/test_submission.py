"""The submission plan: golden dry runs for every backend, the CLI prints exactly the plan, and the backends
submit exactly the plan (a changed plan is submitted changed: nothing is derived from the spec again)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from clitools import checkout_at
from stubtools import on_path, write_command

from ddpctl.backends.slurm.sbatch import SbatchBackend
from ddpctl.node.launch import prepare
from ddpctl.node.localenv import local_node_env
from ddpctl.plan.submission import PLACEHOLDER_JOB_ID, PLACEHOLDER_JOB_NUMBER, SubmissionPlan, build
from ddpctl.proc import Completed
from ddpctl.run.layout import RunLayout
from ddpctl.snapshot import check
from ddpctl.spec import load_spec, resolve_paths, spec_to_mapping

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
PROJECT = Path("/project")  # a fixed pretend checkout, so golden files do not depend on where tests run
FIXED = ("python=/usr/bin/python3",)
BACKENDS = ("sbatch", "submitit", "local")


def example_plan(backend: str, root: Path = PROJECT) -> SubmissionPlan:
    return build(checkout_at(load_spec(ROOT / "jobs" / "example.yaml", FIXED), root), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_golden_dry_run(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = example_plan(backend).text()
    golden = GOLDEN / f"dry-run-{backend}.txt"
    if os.environ.get("DDPCTL_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_dry_run_prints_exactly_the_plan(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    argv = [
        sys.executable,
        "-m",
        "ddpctl",
        "submit",
        "jobs/example.yaml",
        "--dry-run",
        "--backend",
        backend,
        *(f"--set={item}" for item in FIXED),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    # The plan as submitted, with the script each attempt runs: the one in the run's copy of the code.
    spec = resolve_paths(load_spec(ROOT / "jobs" / "example.yaml", FIXED), ROOT)
    preview = check(spec)
    assert preview is not None
    code = RunLayout(spec.run_base.resolve() / PLACEHOLDER_JOB_ID).code_dir
    text = build(dataclasses.replace(spec, script=str(code / preview.script_rel)), backend).text()
    assert done.stdout.startswith(text)
    assert f"(checked, not copied); each attempt runs {code / preview.script_rel}" in done.stdout[len(text) :]


def test_submitit_plan_shows_its_executor_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    plan = example_plan("submitit")
    assert plan.script is None
    params = plan.executor_parameters()
    assert params["additional_parameters"]["signal"] == "USR2@60"
    assert json.dumps(params, indent=2) in plan.text()
    params["nodes"] = 99  # a copy: the plan stays as printed
    assert plan.executor_parameters()["nodes"] == 2


def test_local_plan_is_what_each_launcher_computes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    spec = dataclasses.replace(
        resolve_paths(load_spec(ROOT / "jobs" / "example.yaml", FIXED), ROOT), run_dir=str(tmp_path)
    )
    plan = build(spec, "local")
    run_dir = plan.spec.run_base / PLACEHOLDER_JOB_ID
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(plan.spec)))
    for node in plan.nodes:
        env = local_node_env(plan.spec, int(PLACEHOLDER_JOB_NUMBER), 0, node.dist.node_rank)
        _, dist, _, launched, _ = prepare(run_dir, env)
        assert (dist, launched) == (node.dist, node.plan)


class FakeSlurm:
    """Our own Runner seam: records what sbatch was given, answers like sbatch/scontrol would."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.submitted: str | None = None

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(tuple(argv))
        if argv[0] == "sbatch":
            # `sbatch --parsable SCRIPT STAGING-DIR-NAME`: the script gets its submission's tag as its argument
            assert list(argv[:2]) == ["sbatch", "--parsable"] and argv[-1] == Path(argv[2]).parent.name, argv
            self.submitted = Path(argv[2]).read_text()
            return Completed(tuple(argv), 0, "4242\n", "")
        return Completed(tuple(argv), 0, "", "")


@pytest.fixture
def sbatch_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """check_available() only looks sbatch up on PATH; the fake runner answers for it."""
    monkeypatch.setenv("PATH", on_path(write_command(tmp_path / "bin", "sbatch").parent))


@pytest.mark.usefixtures("sbatch_on_path")
def test_sbatch_backend_submits_the_plans_script_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    spec = dataclasses.replace(
        resolve_paths(load_spec(ROOT / "jobs" / "example.yaml", FIXED), ROOT), run_dir=str(tmp_path / "runs")
    )
    plan = build(spec, "sbatch")
    assert plan.script is not None
    changed = dataclasses.replace(plan, script=plan.script + "# this line is only in the plan\n")
    slurm = FakeSlurm()
    record = SbatchBackend(runner=slurm).submit(changed, ROOT / "jobs" / "example.yaml")
    assert slurm.submitted == changed.script
    assert (Path(record.run_dir) / "job.sbatch").read_text() == changed.script
    # Not held: one sbatch, no release round trip (the batch script waits for the run dir instead).
    assert [c[:2] for c in slurm.calls] == [("sbatch", "--parsable")]
    assert "--hold" not in slurm.calls[0]
    assert yaml.safe_load((Path(record.run_dir) / "job.yaml").read_text()) == spec_to_mapping(spec)
    # slurm.out is the file Slurm writes beside the run dirs (the job may open it before the run dir exists).
    slurm_out = Path(record.run_dir) / "slurm.out"
    beside = tmp_path / "runs" / "example" / ".slurm-4242.out"
    assert "#SBATCH --output=" + str(beside).replace("4242", "%j") in str(slurm.submitted).splitlines()
    assert slurm_out.samefile(beside)


@pytest.mark.usefixtures("sbatch_on_path")
def test_sbatch_submit_keeps_what_a_job_started_first_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job may start (and Slurm create its --output) before submit commits the run dir: that output stays
    in the run dir's slurm.out, not replaced by an empty file."""
    monkeypatch.chdir(ROOT)
    spec = dataclasses.replace(
        resolve_paths(load_spec(ROOT / "jobs" / "example.yaml", FIXED), ROOT), run_dir=str(tmp_path / "runs")
    )
    early = tmp_path / "runs" / "example" / ".slurm-4242.out"

    class StartsAtOnce(FakeSlurm):
        def __call__(self, argv: Sequence[str]) -> Completed:
            done = super().__call__(argv)
            if argv[0] == "sbatch":
                early.write_text("written by the job before submit committed\n")
            return done

    record = SbatchBackend(runner=StartsAtOnce()).submit(build(spec, "sbatch"), ROOT / "jobs" / "example.yaml")
    assert (Path(record.run_dir) / "slurm.out").read_text() == "written by the job before submit committed\n"


def test_submitit_executor_gets_the_plans_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("submitit")
    from ddpctl.backends.slurm.submitit import make_executor

    # submitit's SlurmExecutor only checks that srun is on PATH
    monkeypatch.setenv("PATH", on_path(write_command(tmp_path / "bin", "srun").parent))
    monkeypatch.chdir(ROOT)
    plan = example_plan("submitit")
    params = plan.executor_parameters()
    params["job_name"] = "only-in-the-plan"
    changed = dataclasses.replace(plan, executor_json=json.dumps(params))
    executor = make_executor(changed.spec, tmp_path / "base", [], changed.executor_parameters())
    assert "#SBATCH --job-name=only-in-the-plan" in executor._make_submission_file_text("CMD", "uid").splitlines()


@pytest.mark.parametrize("backend", ["sbatch", "local"])
def test_preview_expands_the_node_list_once_for_all_nodes(backend: str) -> None:
    # Every node's preview used to build and expand its own copy of the N-host list: N² work, 67 s at
    # 10,000 nodes (benchmarks/bench_scale.py --dry-run-only). One shared tuple means it was built once.
    spec = dataclasses.replace(load_spec(ROOT / "jobs" / "example.yaml"), nodes=5)
    plan = build(spec, backend)
    hosts = [node.dist.hosts for node in plan.nodes]
    assert len(hosts) == 5 and len(hosts[0]) == 5
    assert all(h is hosts[0] for h in hosts)


@pytest.mark.usefixtures("sbatch_on_path")
def test_sbatch_submit_that_cannot_commit_cancels_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job exists (and may have started) but its run dir cannot take the job id: the job is cancelled and
    neither the staging dir nor the output the job had begun are left behind."""
    monkeypatch.chdir(ROOT)
    spec = dataclasses.replace(
        resolve_paths(load_spec(ROOT / "jobs" / "example.yaml", FIXED), ROOT), run_dir=str(tmp_path / "runs")
    )
    base = tmp_path / "runs" / "example"
    (base / "4242" / "in-the-way").mkdir(parents=True)  # a non-empty directory: the rename fails

    class StartsAtOnce(FakeSlurm):
        def __call__(self, argv: Sequence[str]) -> Completed:
            if argv[0] == "sbatch":
                (base / ".slurm-4242.out").write_text("started\n")
            return super().__call__(argv)

    slurm = StartsAtOnce()
    with pytest.raises(OSError):
        SbatchBackend(runner=slurm).submit(build(spec, "sbatch"), ROOT / "jobs" / "example.yaml")
    assert [c[0] for c in slurm.calls] == ["sbatch", "scancel"]
    assert sorted(p.name for p in base.iterdir()) == ["4242"]
