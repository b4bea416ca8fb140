"""A completed run whose ranks never joined a process group ends COMPLETED with a warning (issue 42 item 5):
the record each worker leaves, the decision's reading of it, and one real local run of a script that exits 0
at once beside the real script that forms a group and destroys it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clitools import ALLREDUCE_SCRIPT, Cli, events, write_spec

from ddpctl.node.batch import decide_run
from ddpctl.node.nogroup import warning
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec, spec_to_mapping


def layout_with(tmp_path: Path, attempts: list[list[dict[str, object]]]) -> RunLayout:
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    spec = JobSpec(name="x", script="t.py", nodes=2, nproc_per_node=2)
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec)))
    for attempt, infos in enumerate(attempts):
        layout.attempt_dir(attempt).mkdir()
        for rank, info in enumerate(infos):
            layout.rank_info(attempt, rank).write_text(json.dumps({"rank": rank, **info}))
    return layout


NO: dict[str, object] = {"process_group": False}
YES: dict[str, object] = {"process_group": True}
OLD: dict[str, object] = {}


@pytest.mark.parametrize(
    ("attempts", "warned"),
    [
        ([[NO, NO, NO, NO]], True),
        ([[NO, NO, NO, NO], [NO, NO, NO, NO]], True),
        ([[NO, NO, YES, NO]], False),  # one rank joined: a group was formed
        ([[NO, NO, NO, NO], [YES, YES, YES, YES]], False),  # "ever": an earlier or later attempt did
        ([[NO, NO, OLD, NO]], False),  # a worker that does not record it: cannot tell
        ([[NO]], False),  # a run of one rank needs no group
        ([], False),
    ],
)
def test_the_warning_needs_every_rank_of_every_attempt_to_say_no(
    tmp_path: Path, attempts: list[list[dict[str, object]]], warned: bool
) -> None:
    found = warning(layout_with(tmp_path, attempts))
    assert (found is not None) is warned, found
    if found:
        assert "ranks joined a process group" in found and "did not train together" in found


def test_a_heartbeat_step_is_a_group(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, [[NO, NO]])
    record = {"rank": 0, "step": 5, "t": 1.0, "attempt": 0}
    layout.progress_file(0, 0).write_text(json.dumps(record))
    assert warning(layout) is None


def test_the_completion_carries_it_in_the_decision(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, [[NO, NO, NO, NO]])
    decision = decide_run(layout, {}, 0)
    assert decision.action == "finish" and decision.exit_code == 0
    assert decision.reason.startswith("training completed; WARNING: none of the 4 ranks joined"), decision.reason
    recorded = [e for e in events(layout.root) if e["event"] == "decision"]
    assert recorded[-1]["reason"] == decision.reason


def test_joined_group_reads_what_torch_keeps_after_destroy() -> None:
    code = (
        "from ddpctl.node.nogroup import joined_group\n"
        "import torch.distributed as dist\n"
        "print(joined_group())\n"
        "dist.init_process_group('gloo', rank=0, world_size=1, store=dist.HashStore())\n"
        "print(joined_group())\n"
        "dist.destroy_process_group()\n"
        "print(joined_group())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr


@pytest.mark.torchrun
def test_a_script_that_exits_at_once_completes_with_the_warning_one_that_forms_a_group_without(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path / "home")
    for name, source in (("quits", "import sys\nsys.exit(0)\n"), ("allreduce", ALLREDUCE_SCRIPT)):
        script = tmp_path / f"{name}.py"
        script.write_text(source)
        spec = write_spec(
            tmp_path / f"{name}.yaml",
            name=name,
            script=str(script),
            nodes=2,
            nproc_per_node=2 if name == "quits" else 1,
            run_dir=str(tmp_path / "runs"),
            backend="local",
        )
        job_id, run_dir = cli.submit(spec)
        status = cli.wait_terminal(job_id, timeout=180)
        decision = next(e for e in events(run_dir) if e["event"] == "decision")
        shown = cli.run("status", job_id).stdout
        assert status["state"] == "COMPLETED" and decision["exit_code"] == 0, (status, decision)
        if name == "quits":
            assert "WARNING: none of the 4 ranks joined a process group" in decision["reason"], decision
            assert "none of the 4 ranks joined a process group" in shown, shown
        else:
            assert decision["reason"] == "training completed", decision
