"""Local rank -> GPU mapping (ddpctl.node.gpus): literal tables of Slurm step environments."""

from __future__ import annotations

import pytest

from ddpctl.node.gpus import mapping, plan_note, shortage


@pytest.mark.parametrize(
    ("env", "nproc", "expected"),
    [
        # ConstrainDevices: CUDA_VISIBLE_DEVICES relative, SLURM_STEP_GPUS the node's indexes.
        (
            {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "2,3"},
            2,
            [
                {"local_rank": 0, "cuda": 0, "visible": "0", "node_gpu": "2"},
                {"local_rank": 1, "cuda": 1, "visible": "1", "node_gpu": "3"},
            ],
        ),
        (
            {"CUDA_VISIBLE_DEVICES": "3", "SLURM_JOB_GPUS": "3"},
            1,
            [{"local_rank": 0, "cuda": 0, "visible": "3", "node_gpu": "3"}],
        ),
        # More devices than ranks: the first nproc are used.
        (
            {"CUDA_VISIBLE_DEVICES": "0,1,2,3"},
            2,
            [{"local_rank": 0, "cuda": 0, "visible": "0"}, {"local_rank": 1, "cuda": 1, "visible": "1"}],
        ),
        ({}, 2, []),
        ({"CUDA_VISIBLE_DEVICES": ""}, 1, []),
    ],
)
def test_mapping(env: dict[str, str], nproc: int, expected: list[dict[str, object]]) -> None:
    assert mapping(env, nproc) == expected


@pytest.mark.parametrize(
    ("env", "nproc", "gpus", "problem"),
    [
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2, 2, None),
        ({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 2, 4, None),
        ({}, 2, 0, None),  # a CPU job needs no GPU
        (
            {"CUDA_VISIBLE_DEVICES": "0"},
            2,
            2,
            "node n1: CUDA_VISIBLE_DEVICES='0' gives this step 1 GPU(s) but nproc_per_node is 2",
        ),
        ({}, 4, 4, "node n1: CUDA_VISIBLE_DEVICES=None gives this step 0 GPU(s) but nproc_per_node is 4"),
    ],
)
def test_shortage_is_refused_in_one_line(env: dict[str, str], nproc: int, gpus: int, problem: str | None) -> None:
    found = shortage(env, nproc, gpus, "n1")
    if problem is None:
        assert found is None
    else:
        assert found is not None and found.startswith(problem) and "\n" not in found


def test_plan_note() -> None:
    assert plan_note(0, 2) is None
    note = plan_note(4, 4)
    assert note is not None and "local rank r (0..3) uses cuda:r" in note and "never changes it" in note
