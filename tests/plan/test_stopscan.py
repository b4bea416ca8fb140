"""The static look at a training script for signs of stop handling: literal sources, and the real CLI once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from clitools import ddpctl_in

from ddpctl.plan.stopscan import stop_handling_problem

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
