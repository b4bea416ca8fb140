"""spare_nodes: the restart inside the job (ddpctl.node.spare), its choice and its record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ddpctl.node.batch import decide_run
from ddpctl.node.spare import choose, restart_here
from ddpctl.run import history
from ddpctl.run.history import NodeLost, RunHistory, SpareRestarted
from ddpctl.run.layout import RunLayout
from ddpctl.slurm.env import attempt_number
from ddpctl.spec import JobSpec, spec_to_mapping


@pytest.mark.parametrize(
    ("allocation", "avoid", "nodes", "expected"),
    [
        (["n1", "n2", "n3"], {"n2"}, 2, ("n1", "n3")),
        (["n1", "n2", "n3"], set(), 2, ("n1", "n2")),  # no node blamed: the first ones again
        (["n1", "n2", "n3"], {"n1", "n3"}, 2, None),  # too few left: back to the queue
        (["n1", "n2", "n3", "n4"], {"n9"}, 2, ("n1", "n2")),  # a blamed node outside the job changes nothing
        (["n3", "n1", "n2"], {"n3"}, 2, ("n1", "n2")),  # Slurm's order is kept
    ],
)
def test_choose(allocation: list[str], avoid: set[str], nodes: int, expected: tuple[str, ...] | None) -> None:
    assert choose(allocation, avoid, nodes) == expected


def run_dir(tmp_path: Path, spares: int) -> RunLayout:
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    spec = JobSpec(name="x", script="t.py", nodes=2, spare_nodes=spares)
    layout.spec_file.write_text(yaml.safe_dump(spec_to_mapping(spec)))
    return layout


def lose(layout: RunLayout, attempt: int, node: str) -> None:
    layout.attempt_dir(attempt).mkdir()
    layout.node_lost_marker(attempt).write_text(json.dumps({"node": node}))
    history.append(layout.events, NodeLost(attempt=attempt, node=node, node_rank=1, why="its heartbeat stopped"))


ENV = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node[3-5]"}


def test_a_lost_node_restarts_the_run_on_the_spare_and_the_next_attempt_is_numbered_past_it(tmp_path: Path) -> None:
    layout = run_dir(tmp_path, spares=1)
    lose(layout, 0, "node4")
    assert decide_run(layout, ENV, 137).action == "requeue"
    assert restart_here(layout, ENV) == "node[3,5]"
    (event,) = history.load(layout.events).all(SpareRestarted)
    assert (event.attempt, event.next_attempt, event.job_id, event.nodes, event.avoided) == (
        0,
        1,
        "77",
        ("node3", "node5"),
        ("node4",),
    )
    # The batch shell reads the count at a requeued start: attempt numbers stay unique past the restarts.
    assert layout.spare_restarts("77").read_text() == "1\n"
    assert attempt_number({**ENV, "DDPCTL_ALLOC_RESTARTS": "1"}) == 1
    assert attempt_number({**ENV, "SLURM_RESTART_COUNT": "1", "DDPCTL_ALLOC_RESTARTS": "1"}) == 2

    # The second loss in the same job: node3 and node5 are all that is left, one short of two plus the old blame.
    env = {**ENV, "DDPCTL_ALLOC_RESTARTS": "1"}
    lose(layout, 1, "node5")
    assert decide_run(layout, env, 137).action == "requeue"
    assert restart_here(layout, env) == ""  # back to the queue, with both excluded
    assert len(history.load(layout.events).all(SpareRestarted)) == 1


@pytest.mark.parametrize(
    ("spares", "exit_code", "signal_kind", "expected"),
    [
        (0, 137, None, ""),  # no spares: requeue as always
        (1, 137, "preemption", ""),  # a stop ends the allocation itself: requeue
        (1, 0, None, ""),  # finished: nothing to restart
    ],
)
def test_no_restart_inside_the_job(
    tmp_path: Path, spares: int, exit_code: int, signal_kind: str | None, expected: str
) -> None:
    layout = run_dir(tmp_path, spares=spares)
    if exit_code:
        lose(layout, 0, "node4")
    if signal_kind:
        history.append(layout.events, history.Signalled(attempt=0, signal="USR2", kind=signal_kind))
        layout.attempt_dir(0).joinpath("stopped").write_text("{}")
    decide_run(layout, ENV, exit_code)
    assert restart_here(layout, ENV) == expected
    assert not RunHistory.from_records([]).all(SpareRestarted)
    assert not layout.spare_restarts("77").exists()
