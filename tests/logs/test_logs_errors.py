"""Error detection for `ddpctl logs --errors`: tables of log excerpts, and the root-cause ordering."""

from __future__ import annotations

import pytest

from ddpctl.logs.core import Source
from ddpctl.logs.failures import (
    ErrorHit,
    RankFailure,
    first_error,
    order_failures,
    root_cause_note,
)
from ddpctl.node.torchreport import is_collateral

TRACEBACK = """\
step 10 loss=0.3
Traceback (most recent call last):
  File "train.py", line 40, in <module>
    main()
    ^^^^^^
  File "train.py", line 12, in main
    x = model(batch)

RuntimeError: CUDA error: out of memory
During handling of the above exception, another exception occurred:
ValueError: later
"""


@pytest.mark.parametrize(
    ("text", "line_no", "error", "collateral"),
    [
        (TRACEBACK, 2, "RuntimeError: CUDA error: out of memory", False),
        ("ok\nError: config missing key lr\n", 2, "Error: config missing key lr", False),
        ("a\nb\nKilled\n", 3, "Killed", False),
        (
            "CUDA error: an illegal memory access was encountered\n",
            1,
            "CUDA error: an illegal memory access was encountered",
            False,
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1\n",
            1,
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1",
            True,
        ),
        (
            '[rank3]: Traceback (most recent call last):\n[rank3]:   File "x", line 1\n'
            "[rank3]: RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer\n",
            1,
            "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer",
            True,
        ),
        (
            "RuntimeError: NCCL communicator was aborted on rank 1.\n",
            1,
            "RuntimeError: NCCL communicator was aborted on rank 1.",
            True,
        ),
        (
            "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout\n",
            1,
            "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout",
            True,
        ),
        (
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5) ran for 600000 ms\n",
            1,
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5) ran for 600000 ms",
            True,
        ),
        ("KeyError: 'lr'\n", 1, "KeyError: 'lr'", False),
        (
            'Traceback (most recent call last):\n  File "x", line 1\n',
            1,
            "Traceback (most recent call last): (cut off)",
            False,
        ),
        ("Segmentation fault (core dumped)\n", 1, "Segmentation fault (core dumped)", False),
        ("epoch 1 error rate 0.1\nsaved checkpoint\n", None, None, None),
        ("ERROR: something broke\n", 1, "ERROR: something broke", False),
    ],
)
def test_first_error(text: str, line_no: int | None, error: str | None, collateral: bool | None) -> None:
    hit = first_error(text.splitlines())
    if line_no is None:
        assert hit is None
    else:
        assert hit is not None and (hit.line_no, hit.text, hit.collateral) == (line_no, error or "", bool(collateral))


# What a rank's log holds when train.py raises under ddpctl's worker wrapper (Python 3.11, torch installed).
WRAPPED = """step 3 loss=0.5
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/ddpctl/node/worker.py", line 110, in run_script
    runpy.run_path(script, run_name="__main__")
  File "<frozen runpy>", line 291, in run_path
  File "<frozen runpy>", line 98, in _run_module_code
  File "/home/me/runs/ex/local-3/code/train.py", line 71, in <module>
    main()
  File "/home/me/runs/ex/local-3/code/train.py", line 58, in main
    loss = step(model, batch)
  File "/home/me/runs/ex/local-3/code/util.py", line 9, in step
    return model(batch).sum()
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl
    return forward_call(*args, **kwargs)
  File "/usr/lib/python3.11/functools.py", line 12, in wrapper
RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 5x2)
"""


INSTALLED = WRAPPED.replace("/home/me/runs/ex/local-3/code/util.py", "/venv/lib/python3.11/site-packages/util.py")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (WRAPPED, "util.py:9 in step (rank log line 2)"),  # the innermost frame of the user's own code
        (
            WRAPPED.replace("util.py", "/venv/lib/python3.11/site-packages/lib.py"),
            "train.py:58 in main (rank log line 2)",
        ),
        ('Traceback (most recent call last):\n  File "<string>", line 1, in <module>\nValueError: x\n', "line 1"),
        ("KeyError: 'lr'\n", "line 1"),  # no traceback: the rank log's line
    ],
)
def test_errors_point_at_the_users_frame(text: str, where: str) -> None:
    """Issue 45: `logs --errors` said "line 2" (of the rank log) instead of where in the script it failed."""
    hit = first_error(text.splitlines())
    assert hit is not None and hit.where == where


@pytest.mark.parametrize(
    ("text", "collateral"),
    [
        ("RuntimeError: Connection reset by peer", True),
        ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 12 got signal: 15", True),
        ("RuntimeError: ProcessGroupGloo timed out", True),
        ("torch.distributed.DistNetworkError: Connection refused", True),
        ("RuntimeError: CUDA error: out of memory", False),
        ("ZeroDivisionError: division by zero", False),
    ],
)
def test_collateral(text: str, collateral: bool) -> None:
    assert is_collateral(text) is collateral


def failure(rank: int, mtime: float, collateral: bool) -> RankFailure:
    return RankFailure(Source(0, f"node{rank // 2}", rank), ErrorHit(1, f"E{rank}", collateral), mtime)


@pytest.mark.parametrize(
    ("failures", "first_rank"),
    [
        # The root cause is the earliest non-NCCL error, even when NCCL collateral was written earlier.
        ([failure(0, 10.0, True), failure(5, 30.0, False), failure(3, 20.0, False)], 3),
        # Only collateral: the earliest of it.
        ([failure(0, 10.0, True), failure(1, 5.0, True)], 1),
        # Same time: the lower rank, so the answer is stable.
        ([failure(7, 1.0, False), failure(2, 1.0, False)], 2),
    ],
)
def test_order_failures(failures: list[RankFailure], first_rank: int) -> None:
    assert order_failures(failures)[0].source.rank == first_rank


def test_root_cause_note() -> None:
    note = root_cause_note([failure(0, 10.0, True), failure(3, 20.0, False)], 0, 64)
    assert note == (
        "-- first failure in attempt 0: rank 3 on node1, line 1 (earliest non-NCCL error, 2 of 64 ranks failed): E3 --"
    )
    assert root_cause_note([], 2, 8) == "-- no errors found in attempt 2 (8 rank logs) --"
