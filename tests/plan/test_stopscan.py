"""The static look at a training script for signs of stop handling: literal sources, and the real CLI once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from clitools import ddpctl_in

from ddpctl.plan.stopscan import can_announce, scan_event, stop_handling_problem
from ddpctl.spec.load import spec_from_mapping

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("source", "script_signal", "fine"),
    [
        ("from ddpctl import runtime\nstop = runtime.StopAgreement(ctx)", None, True),
        ("import ddpctl.runtime as rt", None, True),
        ("if os.path.exists(os.environ['DDPCTL_STOP_FILE']): save()", None, True),
        ("signal.signal(signal.SIGUSR1, handler)", None, True),
        ("from signal import signal, SIGTERM\nsignal(SIGTERM, h)", None, True),
        ("import lightning as L\ntrainer = L.Trainer()", None, True),
        ("torch.save(model.state_dict(), 'checkpoint.pt')\ndist.barrier()", None, False),
        ("", None, False),
        ("signal.signal(signal.SIGUSR1, handler)", "USR1", True),
        ("from ddpctl import runtime", "USR1", False),  # asked for a signal, installs no handler for it
    ],
)
def test_stop_handling_problem(source: str, script_signal: str | None, fine: bool) -> None:
    assert (stop_handling_problem(source, script_signal) is None) is fine


def test_submit_and_doctor_warn_once_about_a_plain_script(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("import torch\ntorch.save({}, 'checkpoint.pt')\n")
    spec = tmp_path / "plain.yaml"
    spec.write_text(yaml.safe_dump({"name": "plain", "script": str(script), "run_dir": str(tmp_path / "runs")}))
    env = {"DDPCTL_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    ddpctl = ddpctl_in(tmp_path, env)

    dry = ddpctl("doctor", str(spec), "--backend", "local")
    assert "[WARN] stop handling:" in dry.stdout and "shows no sign of handling stops" in dry.stdout, dry.stdout
    # submit says it once, on stderr, and still submits (a static look can be wrong: never an error)
    done = ddpctl("submit", str(spec), "--backend", "local")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("shows no sign of handling stops") == 1, done.stderr


@pytest.mark.parametrize(
    ("source", "announces"),
    [
        ("import ddpctl.runtime as rt\n", True),
        ("from ddpctl import runtime\n", True),
        ("from ddpctl.runtime import StopAgreement\n", True),
        ("agreement = StopAgreement(group)\n", True),
        ('"""Own checkpoints (no ddpctl.runtime)."""\nimport torch\n', False),  # a docstring says so: no listener
        ("# not ddpctl.runtime: a handler of our own\nimport signal\n", False),
        ("print('StopAgreement is not used here')\n", False),
        ("def broken(:\n    import ddpctl.runtime\n", True),  # does not tokenize: the raw source is looked at
    ],
)
def test_can_announce_looks_at_code_not_prose(source: str, announces: bool) -> None:
    assert can_announce(source) is announces


def test_the_readmes_own_checkpoint_script_cannot_announce_so_preempt_does_not_wait() -> None:
    """`preempt` of jobs/own-checkpoint.yaml with requeue.script_signal=null (README) waited 60 s for a listener."""
    assert can_announce((REPO / "jobs" / "own_checkpoint" / "train.py").read_text()) is False
    assert can_announce((REPO / "jobs" / "example" / "train.py").read_text()) is True


def test_a_lightningcli_given_the_stop_callback_in_its_args_can_announce(tmp_path: Path) -> None:
    """Its code names only LightningCLI; without the args, `preempt` would not wait for its ranks to listen."""
    script = tmp_path / "main.py"
    script.write_text("from lightning.pytorch.cli import LightningCLI\nLightningCLI(Model)\n")
    base = {"name": "lit", "script": str(script), "backend": "local"}
    callback = "--trainer.callbacks+=ddpctl.integrations.lightning.StopCallback"
    assert scan_event(spec_from_mapping({**base, "args": ["fit", callback]})).announces is True
    assert scan_event(spec_from_mapping({**base, "args": ["fit"]})).announces is False
