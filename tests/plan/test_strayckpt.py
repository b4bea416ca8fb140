"""Checkpoints kept relative to the working directory (issue 42): literal sources and directories, and the real
CLI once (`doctor`, and `submit` on the local backend)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from clitools import Cli

from ddpctl.plan.strayckpt import check_relative, relative_literals
from ddpctl.spec import JobSpec
from ddpctl.spec.model import CheckpointSettings

TUTORIAL = 'def main(snapshot_path: str = "snapshot.pt"):\n    torch.save(state, snapshot_path)\n'


@pytest.mark.parametrize(
    ("source", "found"),
    [
        (TUTORIAL, ["snapshot.pt"]),
        ("torch.save(s, './ckpt.pt')\ntorch.save(s, 'ckpt.pt')", ["./ckpt.pt", "ckpt.pt"]),
        ("trainer.save_checkpoint('last.ckpt')", ["last.ckpt"]),
        ("torch.save(s, os.path.join(out, f'checkpoint_{step}.pth'))", []),  # an f-string: not a literal
        ("torch.save(s, '/scratch/me/snapshot.pt')", []),  # a directory is named
        ("# torch.save(s, 'snapshot.pt')\nimport checkpoint_utils", []),  # a comment, a module name
        ("model = torch.load('resnet50.pt')", []),  # weights, not a checkpoint
        ("x = 'snapshot.pt", []),  # does not tokenize: nothing, never an error
    ],
)
def test_relative_literals(source: str, found: list[str]) -> None:
    assert relative_literals(source) == found


def spec_for(script: Path, **fields: object) -> JobSpec:
    return JobSpec(name="t", script=str(script), **fields)  # type: ignore[arg-type]


def test_a_tutorial_script_is_warned_unless_its_checkpoints_go_to_the_ckpt_dir(tmp_path: Path) -> None:
    script = tmp_path / "multinode.py"
    script.write_text(TUTORIAL)
    warning = check_relative(spec_for(script), tmp_path)
    assert warning is not None and "'snapshot.pt' without a directory" in warning, warning
    assert "another job of this spec will resume from it" in warning
    pointed = spec_for(script, args=("--snapshot_path", "$DDPCTL_CKPT_DIR/snapshot.pt"))
    assert check_relative(pointed, tmp_path) is None
    assert check_relative(spec_for(script, env=(("OUT", "${DDPCTL_CKPT_DIR}"),)), tmp_path) is None
    script.write_text("from ddpctl import runtime\n" + TUTORIAL)  # the runtime's Checkpointer: the run's dir
    assert check_relative(spec_for(script), tmp_path) is None


def test_a_checkpoint_already_in_the_working_directory_is_warned(tmp_path: Path) -> None:
    code, work = tmp_path / "code", tmp_path / "work"
    code.mkdir()
    work.mkdir()
    script = code / "train.py"
    script.write_text("import torch\n")  # names no checkpoint itself
    (code / "checkpoint_utils.py").write_text("")
    (work / "data.pt").write_bytes(b"x")
    assert check_relative(spec_for(script), work) is None
    (work / "snapshot.pt").write_bytes(b"x")
    warning = check_relative(spec_for(script), work)
    assert warning is not None and f"{work / 'snapshot.pt'} exists before this job's first attempt" in warning
    (work / "snapshot.pt").unlink()
    (code / "checkpoint-300").mkdir()  # the HF Trainer's, beside the script (the snapshot's directory)
    warning = check_relative(spec_for(script), work)
    assert warning is not None and f"{code / 'checkpoint-300'}/ exists" in warning, warning
    (code / "checkpoint-300").rmdir()
    (work / "step_40.bin").write_bytes(b"x")  # the spec's own pattern names it
    pattern = spec_for(script, checkpoint=CheckpointSettings(pattern="step_{step}.bin"))
    assert check_relative(spec_for(script), work) is None
    assert check_relative(pattern, work) is not None


def test_doctor_and_submit_say_it_once(tmp_path: Path) -> None:
    script = tmp_path / "tutorial.py"
    script.write_text("import sys\nSNAPSHOT = 'snapshot.pt'\nsys.exit(0)\n")
    spec = tmp_path / "tutorial.yaml"
    spec.write_text(yaml.safe_dump({"name": "tut", "script": str(script), "run_dir": str(tmp_path / "runs")}))
    cli = Cli(tmp_path / "home", cwd=tmp_path)
    doctor = cli.run("doctor", str(spec), "--backend", "local", check=False)
    assert "[WARN] checkpoint place:" in doctor.stdout and "'snapshot.pt' without a directory" in doctor.stdout
    done = cli.run("submit", str(spec), "--backend", "local")
    assert done.stderr.count("'snapshot.pt' without a directory") == 1, done.stderr
    job_id = done.stdout.split("job ", 1)[1].split()[0]
    assert cli.wait_terminal(job_id, timeout=120)["state"] == "COMPLETED"
