"""Rendering: golden files for every spec in jobs/, `bash -n` on each, and an injection test that EXECUTES a
rendered script with stub srun/scontrol/scancel on PATH and checks what arrives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clitools import checkout_at
from stubtools import RECORDING_STUB, on_path, recorded_argv, recorded_env, write_command

from ddpctl.errors import SpecError
from ddpctl.plan.render import RenderInputs, render_script, sbatch_value, shell_quote
from ddpctl.spec import JobSpec, load_spec, resolve_paths, spec_to_mapping

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
SPECS = sorted((ROOT / "jobs").glob("*.yaml"))
PROJECT = Path("/project")  # a fixed pretend checkout, so golden files do not depend on where tests run


def render_fixed(spec_path: Path) -> str:
    spec = checkout_at(load_spec(spec_path), PROJECT)
    return render_script(spec, RenderInputs(run_base=PROJECT / "runs" / spec.name, python="/usr/bin/python3"))


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_golden(spec_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = render_fixed(spec_path)
    golden = GOLDEN / f"{spec_path.stem}.sbatch"
    if os.environ.get("DDPCTL_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.exists(), f"no golden file for {spec_path.name}: run with DDPCTL_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.stem for p in SPECS])
def test_bash_syntax(spec_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    script = tmp_path / "job.sbatch"
    script.write_text(render_fixed(spec_path))
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_every_spec_has_a_golden_file() -> None:
    assert {p.stem for p in SPECS} == {p.stem for p in GOLDEN.glob("*.sbatch")}


@pytest.mark.parametrize(
    ("value", "quoted"),
    [("plain", "plain"), ("a b", "'a b'"), ("$(id)", "'$(id)'"), ("it's", "'it'\"'\"'s'"), ("", "''")],
)
def test_shell_quote(value: str, quoted: str) -> None:
    assert shell_quote(value) == quoted


@pytest.mark.parametrize(("value", "out"), [("a100", "a100"), ("gpu:2", "gpu:2"), ("x y", '"x y"')])
def test_sbatch_value(value: str, out: str) -> None:
    assert sbatch_value(value) == out


@pytest.mark.parametrize("value", ['say "hi"', "two\nlines"])
def test_sbatch_value_rejects(value: str) -> None:
    with pytest.raises(SpecError, match="#SBATCH"):
        sbatch_value(value)


NASTY = ["$(touch pwned)", "`touch pwned`", "a'b\"c", "x; touch pwned", "line1\nline2", "$HOME", "*", "\\"]


def test_rendered_script_executes_with_values_arriving_literally(tmp_path: Path) -> None:
    stubs, out = tmp_path / "bin", tmp_path / "out"
    for name in ("srun", "scontrol", "scancel", "squeue"):
        write_command(stubs, name, RECORDING_STUB)
    (tmp_path / "train.py").write_text("")
    env_values = {f"V{i}": value for i, value in enumerate(NASTY)}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "inj",
                "script": "train.py",
                "env": env_values,
                "run_dir": "we ird $(dir)",
                "sbatch": {"comment": "a b"},
            }
        )
    )
    spec = resolve_paths(load_spec(spec_file, check_paths=False), tmp_path)
    run_base = tmp_path / "we ird $(dir)" / "inj"
    run_dir = run_base / "4242"
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(spec, RenderInputs(run_base=run_base, python=sys.executable)))
    env = {**os.environ, "PATH": on_path(stubs), "STUB_OUT": str(out), "SLURM_JOB_ID": "4242"}
    done = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.rglob("pwned")), "a value was executed by the shell"
    argv = recorded_argv(out, "srun")
    assert argv[-1] == str(run_dir) and argv[-2] == "launch"
    srun_env = recorded_env(out, "srun")
    assert {k: srun_env[k] for k in env_values} == env_values
    # The run finished normally: no requeue, and the decision is on record.
    assert not (out / "scontrol").exists()
    assert '"action": "finish"' in (run_dir / "events.jsonl").read_text()


def test_unknown_template_is_a_spec_error(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text("name: x\nscript: t.py\n")
    spec = load_spec(spec_file, check_paths=False)
    from dataclasses import replace

    with pytest.raises(SpecError, match="template"):
        render_script(replace(spec, template="nope"), RenderInputs(Path("/r"), "python"))


def test_run_dir_is_data_in_slurms_output_pattern(tmp_path: Path) -> None:
    """`%` starts a Slurm filename pattern (%j, %x, ...): a run_dir with one must arrive literally."""
    spec = resolve_paths(load_spec(ROOT / "jobs/example.yaml"), ROOT)
    base = Path("/data/50%x/{x}{rank}") / spec.name
    text = render_script(spec, RenderInputs(run_base=base, python="/usr/bin/python3"))
    assert '#SBATCH --output="/data/50%%x/{x}{rank}/example/.slurm-%j.out"\n' in text


ESCAPES = [
    "{{ cycler.__init__.__globals__.os.system('touch PWNED') }}",
    "{{ self.__init__.__globals__.__builtins__.open('PWNED', 'w') }}",
    "{% set x = spec.args.__class__.__mro__ %}",
    "{{ lipsum.__globals__['os'].system('touch PWNED') }}",
    "{{ setup.append('rm -rf ~') }}",  # an immutable sandbox: the template may not mutate what it is given
]


@pytest.mark.parametrize("body", ESCAPES)
def test_templates_cannot_reach_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "evil.sbatch.j2"
    template.write_text(f"#!/bin/bash\n{body}\n")
    (tmp_path / "t.py").write_text("")
    spec = load_spec_text(tmp_path, f"name: x\nscript: t.py\ntemplate: {template}\n")
    with pytest.raises(SpecError, match=r"template .*evil.sbatch.j2: .*(unsafe|not safely callable)"):
        render_script(spec, RenderInputs(Path("/r"), "python"))
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{{ 'x' * 100000000 }}", "a value of 100000000 items is larger than"),
        ("{{ 2 ** 100000 }}", "exponent 100000 is larger than 256"),
        ("{{ ((2 ** 256) ** 256) ** 256 }}", r"\*\* 256 would have more than 65536 bits"),
        ("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}", "rendered script is larger than 1048576 bytes"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "took longer than 0.5 s"),
        ("{{ 1 / 0 }}", "ZeroDivisionError: division by zero"),
    ],
)
def test_template_work_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, message: str) -> None:
    monkeypatch.setattr("ddpctl.plan.sandbox.RENDER_TIMEOUT_S", 0.5)
    monkeypatch.chdir(tmp_path)
    template = tmp_path / "big.sbatch.j2"
    template.write_text(body + "\n")
    (tmp_path / "t.py").write_text("")
    spec = load_spec_text(tmp_path, f"name: x\nscript: t.py\ntemplate: {template}\n")
    with pytest.raises(SpecError, match=message):
        render_script(spec, RenderInputs(Path("/r"), "python"))


def load_spec_text(tmp_path: Path, text: str) -> JobSpec:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_spec(path)


def test_spare_nodes_ask_slurm_for_more_nodes_that_a_failure_does_not_end(tmp_path: Path) -> None:
    base = load_spec(ROOT / "jobs" / "example.yaml")
    spared = load_spec(ROOT / "jobs" / "example.yaml", overrides=["spare_nodes=1"])
    inputs = RenderInputs(run_base=tmp_path / "runs", python="/usr/bin/python3")
    text, plain = render_script(spared, inputs), render_script(base, inputs)
    assert f"#SBATCH --nodes={base.nodes + 1}\n#SBATCH --ntasks-per-node=1\n#SBATCH --no-kill\n" in text
    assert f"step_opts=(--nodes={base.nodes} --ntasks={base.nodes})" in text
    assert "--no-kill" not in plain and "step_opts" not in plain and "spare-step" not in plain
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, check=False).returncode == 0
    with pytest.raises(SpecError, match="spare_nodes: backend submitit cannot restart inside its allocation"):
        load_spec(ROOT / "jobs" / "example.yaml", overrides=["spare_nodes=1", "backend=submitit"])
