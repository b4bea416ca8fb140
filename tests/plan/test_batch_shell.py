"""The rendered batch shell itself, executed by bash with stub srun/scontrol and a stub `python -m ddpctl` that
plays the decision: what the shell does around its decision, which the cluster tests cannot time exactly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from stubtools import write_command

from ddpctl.plan.render import RenderInputs, render_script
from ddpctl.run.layout import NODE_LOST
from ddpctl.spec import spec_from_mapping, spec_to_mapping

SRUN = """#!/bin/bash
sleep 0.2
"""
# `python -c BOOT ddpctl internal WHAT RUN_DIR ...` (ddpctl.pyargv: not this interpreter): decide says what
# DECISION says; the step after it (chain-drop or scontrol requeue's wait) gets the warning signal a second time,
# as the time limit's warning arriving late does; on-signal records that it ran.
PYTHON = """#!/bin/bash
shift 3
case "$1 $2" in
  "internal decide") echo "$DECISION" ;;
  "internal on-signal") echo "$*" >> "$STUB_OUT/on-signal" ;;
  "internal chain-drop"|"internal chain-next") kill -USR2 "$PPID"; sleep 0.5; echo "$2" >> "$STUB_OUT/after" ;;
esac
"""
SCONTROL = """#!/bin/bash
kill -USR2 "$PPID"; sleep 0.5; echo "scontrol $*" >> "$STUB_OUT/after"
"""


def run_shell(
    tmp_path: Path, fields: dict[str, object], stubs: dict[str, str], env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """Render the spec's batch shell (`fields` over a minimal spec) for job 4242 with its run dir in place, and run
    it with bash and the given stub commands on PATH; returns the result, the stubs' output dir and the run dir."""
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    out.mkdir()
    for name, text in stubs.items():
        write_command(bin_dir, name, text)
    spec = spec_from_mapping(
        {"name": "ex", "script": "/p/train.py", "run_dir": str(tmp_path / "runs"), **fields},
        str(tmp_path / "ex.yaml"),
        check_paths=False,
    )
    run_dir = tmp_path / "runs" / "ex" / "4242"
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))
    script = tmp_path / "job.sbatch"
    text = render_script(spec, RenderInputs(run_base=run_dir.parent, python=str(bin_dir / "python")))
    script.write_text(text.replace("sleep 300 &", "sleep 1 &"))
    full_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_OUT": str(out), "SLURM_JOB_ID": "4242"}
    done = subprocess.run(
        ["bash", str(script)], env={**full_env, **(env or {})}, capture_output=True, text=True, timeout=60, check=False
    )
    return done, out, run_dir


@pytest.mark.parametrize(("mode", "decision"), [("chain", "finish"), ("chain", "requeue"), ("requeue", "requeue")])
def test_a_signal_after_the_step_ended_does_not_run_the_stop_handler(tmp_path: Path, mode: str, decision: str) -> None:
    """The warning signal that arrives once the step has ended (while chain-drop runs after a finish) used to run
    the handler again, which submits a chained successor: the finished run then read PENDING."""
    stubs = {"srun": SRUN, "scontrol": SCONTROL, "python": PYTHON}
    done, out, _ = run_shell(tmp_path, {"requeue": {"mode": mode}}, stubs, {"DECISION": decision})
    assert (out / "after").exists(), done.stderr  # the step after the decision ran and signalled
    assert not (out / "on-signal").exists(), (out / "on-signal").read_text()


def test_a_stop_during_the_setup_lines_is_kept_and_given_to_the_step(tmp_path: Path) -> None:
    """A stop signal before the handler is set (here during the spec's setup lines; also while the run dir is
    not there yet) used to end the shell by the signal's default action: the job died at once."""
    stubs = {
        "srun": '#!/bin/bash\necho "$*" >> "$STUB_OUT/srun"\n',
        "python": PYTHON.replace('"internal decide") echo "$DECISION"', '"internal decide") :'),
    }
    done, out, run_dir = run_shell(tmp_path, {"setup": ["kill -USR2 $$"]}, stubs)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert (out / "on-signal").read_text() == f"internal on-signal {run_dir} --signal USR2 --before-step\n"
    assert "launch" in (out / "srun").read_text()  # the step still started, and took the stop from its files


@pytest.mark.parametrize("lost", [True, False])
def test_an_attempt_that_lost_a_node_continues_in_a_successor_not_a_requeue(tmp_path: Path, lost: bool) -> None:
    """Slurm keeps a job that lost a node COMPLETING until it gives up on the node (SlurmdTimeout, 300 s by
    default), and its requeue waits as long: the attempt after a lost node is a successor job that excludes it
    (ddpctl.node.chain); any other requeue stays a requeue of this job."""
    lost_file = f'"$RUN_DIR_FOR_STUB/attempt-0/{NODE_LOST}"'
    srun = f'#!/bin/bash\nmkdir -p "$RUN_DIR_FOR_STUB/attempt-0"\n{"touch" if lost else ":"} {lost_file}\n'
    python = PYTHON.replace('kill -USR2 "$PPID"; sleep 0.5; echo "$2"', 'echo "$2 $*"')
    scontrol = '#!/bin/bash\necho "scontrol $*" >> "$STUB_OUT/after"\nkill -TERM "$PPID"\n'
    stubs = {"srun": srun, "scontrol": scontrol, "python": python}
    run_dir = tmp_path / "runs" / "ex" / "4242"
    fields: dict[str, object] = {"requeue": {"mode": "requeue"}}
    done, out, _ = run_shell(tmp_path, fields, stubs, {"DECISION": "requeue", "RUN_DIR_FOR_STUB": str(run_dir)})
    after = (out / "after").read_text()
    if lost:
        assert "internal chain-next" in after and "a lost node" in after and "scontrol" not in after, after
        assert done.returncode == 0, done.stderr
    else:
        assert "chain-next" not in after and "scontrol requeue 4242" in after, after
