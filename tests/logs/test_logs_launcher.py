"""Deaths only the launcher saw (issue 10 #15): torchrun's failure report in node-<k>.log, parsed and ranked."""

from __future__ import annotations

import time

import pytest

from ddpctl.logs.core import Source
from ddpctl.logs.failures import ErrorHit, RankFailure, order_failures, root_cause_note, with_launcher_reports
from ddpctl.node.torchreport import LauncherFailure, launcher_failures

# Verbatim (paths shortened) from a torch 2.13 launcher log after `kill -9` of local rank 1.
NODE_LOG = """\
W1123 13:37:14.479000 27815 site-packages/torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 27925 closing signal SIGTERM
E1123 13:37:14.496000 27815 site-packages/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 27926) of binary: /usr/bin/python
Traceback (most recent call last):
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
ddpctl.node.worker FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-23_13:37:14
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 27925)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 27925
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_13:37:14
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 27926)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 27926
=======================================================
"""  # noqa: E501
SECOND = time.mktime(time.strptime("2026-11-23_13:37:14", "%Y-%m-%d_%H:%M:%S"))


def test_parse_torchruns_failure_report() -> None:
    found = launcher_failures(NODE_LOG.splitlines())
    assert [(f.rank, f.exitcode, f.line_no) for f in found] == [(0, -15, 13), (1, -9, 22)]
    assert found[0].when == SECOND and found[1].when == pytest.approx(SECOND + 0.496, abs=1e-3)
    assert found[0].collateral and not found[1].collateral


def test_nothing_reported_on_success() -> None:
    assert launcher_failures(["I1123 started", "[0]:", "  rank      : 0 (local_rank: 0)", "  exitcode  : 0"]) == []


def rank_failure(rank: int, when: float, text: str, collateral: bool) -> RankFailure:
    return RankFailure(Source(0, "n", rank), ErrorHit(3, text, collateral), when)


def test_a_killed_rank_is_named_before_the_gloo_errors_it_caused() -> None:
    gloo = "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer"
    own = {2: rank_failure(2, SECOND + 0.45, gloo, True), 3: rank_failure(3, SECOND + 0.44, gloo, True)}
    reports = [(Source(0, "n", r.rank), r, "node-0.log", SECOND + 5) for r in launcher_failures(NODE_LOG.splitlines())]
    failures = with_launcher_reports(own, reports)
    first = order_failures(failures)[0]
    assert (first.source.rank, first.hit.where, first.hit.collateral) == (1, "node-0.log line 22", False)
    note = root_cause_note(failures, 0, 4)
    assert "rank 1 on n, node-0.log line 22" in note and "killed by SIGKILL (exitcode -9)" in note


def test_a_rank_logs_real_error_keeps_its_detail() -> None:
    own = {1: rank_failure(1, SECOND, "ValueError: bad lr", False)}
    report = LauncherFailure(rank=1, exitcode=1, line_no=9, when=SECOND + 1)
    assert with_launcher_reports(own, [(Source(0, "n", 1), report, "node-0.log", SECOND)]) == [own[1]]


def test_an_exit_status_with_a_silent_rank_log_is_named() -> None:
    report = LauncherFailure(rank=4, exitcode=3, line_no=9, when=None)
    (failure,) = with_launcher_reports({}, [(Source(0, "n", 4), report, "node-2.log", 123.0)])
    assert (failure.hit.text, failure.mtime, failure.hit.collateral) == (
        "exited with status 3, as its launcher reported",
        123.0,
        False,
    )
