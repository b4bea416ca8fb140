"""A failure that repeats is the script's or the setup's (ddpctl.node.repeat), and setup errors blame no node."""

from __future__ import annotations

import pytest

from ddpctl.node.blame import Blame, Death, Facts, blame
from ddpctl.node.decide import RunOutcome, decide
from ddpctl.node.exclude import blame as exclusion_blame
from ddpctl.node.repeat import Failure, place_key, same
from ddpctl.node.torchreport import is_collateral, is_setup_error
from ddpctl.run.history import Decided, RunHistory
from ddpctl.run.history.catalog import parse_event
from ddpctl.spec import RequeuePolicy

# What NCCL 2.28 raised on an H200 when two ranks shared one GPU, the same on every attempt.
NCCL_INVALID_USAGE = (
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77,"
    " invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9"
)


@pytest.mark.parametrize(
    ("text", "setup", "collateral"),
    [
        (NCCL_INVALID_USAGE, True, False),
        ("RuntimeError: No backend type associated with device type cpu", True, False),
        ("ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", True, False),
        ("ModuleNotFoundError: No module named 'transformers'", True, False),
        ("AssertionError: Torch not compiled with CUDA enabled", True, False),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer", False, True),
        ("torch.distributed.DistBackendError: NCCL communicator was aborted on rank 3", False, True),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", False, False),
        ("ValueError: bad learning rate", False, False),
    ],
)
def test_setup_errors_are_never_collateral(text: str, setup: bool, collateral: bool) -> None:
    assert (is_setup_error(text), is_collateral(text)) == (setup, collateral)


def test_a_setup_error_on_every_rank_is_blamed_as_setup_not_a_dead_peer() -> None:
    # Before: every rank's error named NCCL, so all were collateral and the attempt was "a peer died without a
    # record" (rank-crash, charged to max_node_failures, the node excluded).
    own = tuple(
        Death(f"n{r // 2 + 1}", r, 1, 10.0 + r, NCCL_INVALID_USAGE, is_collateral(NCCL_INVALID_USAGE)) for r in range(4)
    )
    found = blame(Facts(exit_code=1, own=own))
    assert found == Blame("setup-error", "n1", 0, NCCL_INVALID_USAGE)
    assert not found.infrastructure


def test_a_setup_error_excludes_no_node() -> None:
    records = [
        {"event": "attempt-start", "attempt": 0},
        {"event": "decision", "attempt": 0, "action": "requeue", "kind": "failure", "cause": "setup-error",
         "cause_node": "n1", "cause_rank": 0, "cause_why": NCCL_INVALID_USAGE},
    ]  # fmt: skip
    assert exclusion_blame(RunHistory.from_records(records).attempt(0)) is None


def test_place_key_drops_what_varies_between_runs_of_one_failure() -> None:
    one = "RuntimeError: worker pid 4242 at 0x7f3a1c: timed out after 12.5 s at 13:37:14.496"
    two = "RuntimeError: worker pid 977 at 0x55aa00: timed out after 3 s at 09:01:02"
    assert place_key(one) == place_key(two)
    assert place_key("step 5 failed") != place_key("step 6 failed")


F = Failure


@pytest.mark.parametrize(
    ("before", "now", "expected"),
    [
        (F(0, "setup-error", None, "x"), F(1, "setup-error", None, "x"), True),
        (F(0, "script-error", None, "x", "n1"), F(1, "script-error", None, "x", "n2"), True),  # no step: elsewhere
        # The same error at no known step on the same node twice: a bad node (excluded), not the script.
        (F(0, "script-error", None, "x", "n1"), F(1, "script-error", None, "x", "n1"), False),
        (F(0, "setup-error", None, "x", "n1"), F(1, "setup-error", None, "x", "n1"), True),
        (F(2, "script-error", 7, "x"), F(3, "script-error", 7, "x"), True),
        (F(0, "hang", 5, "wedge (train.py:9)"), F(1, "hang", 5, "wedge (train.py:9)"), True),
        (F(0, "rank-crash", 5, "killed by SIGSEGV"), F(1, "rank-crash", 5, "killed by SIGSEGV"), True),
        # A signal or a stall without a known step: a sick fleet can do that twice by chance.
        (F(0, "rank-crash", None, "killed by SIGKILL"), F(1, "rank-crash", None, "killed by SIGKILL"), False),
        (F(0, "hang", None, "wedge"), F(1, "hang", None, "wedge"), False),
        (F(0, "hang", 5, "wedge (train.py:9)"), F(1, "hang", 6, "wedge (train.py:9)"), False),  # other step
        (F(0, "hang", 5, "wedge (train.py:9)"), F(1, "hang", 5, "other (train.py:12)"), False),  # other place
        (F(0, "script-error", 7, "x"), F(1, "script-error", None, "x"), False),
        (F(0, "node-lost", 5, "no heartbeat"), F(1, "node-lost", 5, "no heartbeat"), False),  # never a repeat
        (F(0, "preflight", None, "gpu"), F(1, "preflight", None, "gpu"), False),
        (F(0, "script-error", None, "x", "n1"), F(2, "script-error", None, "x", "n2"), False),  # not consecutive
        (F(0, "script-error", None, "x"), F(1, "setup-error", None, "x"), False),
        (F(0, "script-error", None, "", "n1"), F(1, "script-error", None, "", "n2"), False),  # nothing to compare
    ],
)
def test_same_failure_table(before: Failure, now: Failure, expected: bool) -> None:
    assert same(before, now) is expected


def previous(cause: str, step: int | None, at: str, kind: str = "failure") -> Decided:
    found = parse_event(
        {"event": "decision", "attempt": 0, "action": "requeue", "kind": kind, "cause": cause, "cause_step": step,
         "cause_at": at}
    )  # fmt: skip
    assert isinstance(found, Decided)
    return found


def test_the_second_identical_setup_error_ends_the_run_whatever_the_budget() -> None:
    why = NCCL_INVALID_USAGE
    before = previous("setup-error", None, place_key(why))
    outcome = RunOutcome(1, False, None, blame=Blame("setup-error", "n2", 3, why), attempt=1, previous=before)
    policy = RequeuePolicy(max_failures=5)
    decision = decide(outcome, policy, {"failure": 1})
    assert (decision.action, decision.kind, decision.exit_code) == ("finish", "failure", 1)
    assert decision.reason.startswith("the same error on attempts 0 and 1 (")
    assert decision.reason.endswith("this looks like a setup problem, not a node; not retried")
    # The first time it is retried within the script's budget, and the place is recorded for the next decision.
    first = decide(RunOutcome(1, False, None, blame=Blame("setup-error", "n1", 0, why)), policy, {})
    assert first.action == "requeue" and first.failure == Failure(0, "setup-error", None, place_key(why), "n1")


def test_the_same_hang_twice_ends_the_run_and_another_place_is_retried() -> None:
    policy = RequeuePolicy()
    hang = Blame(
        "hang", "n2", 3, "no progress for 15.2 s; stopped first at step 5: wedge (train.py:9)", at="wedge (train.py:9)"
    )
    again = RunOutcome(
        1,
        False,
        None,
        blame=hang,
        attempt=1,
        reached=5,
        previous=previous("hang", 5, "wedge (train.py:9)", "node_failure"),
    )
    decision = decide(again, policy, {"node_failure": 1})
    assert decision.action == "finish" and decision.kind == "node_failure"
    assert decision.reason.startswith("the same failure at step 5 on attempts 0 and 1 (no progress for 15.2 s")
    elsewhere = RunOutcome(
        1,
        False,
        None,
        blame=hang,
        attempt=1,
        reached=9,
        previous=previous("hang", 5, "wedge (train.py:9)", "node_failure"),
    )
    assert decide(elsewhere, policy, {"node_failure": 1}).action == "requeue"
