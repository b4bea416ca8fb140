"""Issue 43 item 14: what a remote command is asked with. An option value that starts with `-` (`logs --grep=-f`,
`--node`, `--rank`, `--attempt`, `sweep results --metric`, `preempt --wait`) was forwarded as two words, which the
cluster's ddpctl read as an option of its own. Each value now goes as one word `--opt=value`; proven by parsing
the forwarded words with the real parser, as the cluster's ddpctl does."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pytest

from ddpctl.api.remote import log_words
from ddpctl.cli import build_parser
from ddpctl.cli import logs as logs_cli
from ddpctl.cli import preempt as preempt_cli
from ddpctl.cli import sweep as sweep_cli
from ddpctl.cli.common import RESULTS


def parse(words: Sequence[str]) -> argparse.Namespace:
    """The words as the cluster's `ddpctl` main() reads them."""
    argv = list(words)
    if argv[:2] == ["sweep", "results"]:
        argv[:2] = [RESULTS]
    return build_parser().parse_args(argv)


@pytest.mark.parametrize(
    "options",
    [
        ["--grep=-f"],
        ["--grep=--follow"],
        ["--node=-n1,-n2", "--rank=-1", "--attempt=-2"],
        ["-f", "--grep=-x", "--poll"],
        ["--errors", "--grep=-"],
    ],
)
def test_logs_values_that_start_with_a_dash_reach_the_cluster_as_values(options: list[str]) -> None:
    here = parse(["logs", "--cluster", "gpu", *options, "--", "-job"])
    there = parse(logs_cli.remote_words(here))
    for key in ("grep", "node", "rank", "attempt", "follow", "errors", "poll", "job"):
        assert getattr(there, key) == getattr(here, key), key
    assert there.cluster is None


def test_sweep_results_metric_that_starts_with_a_dash() -> None:
    here = parse(["sweep", "results", "--cluster", "gpu", "--metric=-loss", "--mode", "max", "--json", "--", "-s"])
    there = parse(sweep_cli.remote_words(here))
    assert (there.metric, there.mode, there.json, there.runs) == ("-loss", "max", True, ["-s"])


def test_preempt_wait_and_kind() -> None:
    here = parse(["preempt", "--cluster", "gpu", "--wait=-1", "--as", "timeout", "--", "-job"])
    there = parse(preempt_cli.remote_words(here))
    assert (there.wait, there.kind, there.job) == (-1.0, "timeout", "-job")


def test_the_python_api_logs_words() -> None:
    words = log_words(follow=True, rank=[-1, 2], node="-n1", attempt="-3", grep="-f", job_id="-7")
    there = parse(words)
    assert (there.rank, there.node, there.attempt, there.grep, there.follow, there.job) == (
        "-1,2",
        "-n1",
        "-3",
        "-f",
        True,
        "-7",
    )
    assert (there.json, there.timestamps) == (True, True)
