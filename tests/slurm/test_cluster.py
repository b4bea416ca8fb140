"""ddpctl.slurm.cluster: the cluster's facts from literal scontrol output of Slurm 22.05 and 24.11 (tests/
scontrol_output.py), gathered through the Runner seam (every question at once, each asked once), and what an
unanswered question leaves."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from scontrol_output import (
    CONFIG_22_05,
    CONFIG_22_05_MORE,
    CONFIG_SECTIONED,
    JOB_22_05,
    NODE_22_05,
    PARTITION_22_05,
    PARTITION_24_11,
)

from ddpctl.proc import Completed
from ddpctl.slurm import cluster, commands
from ddpctl.slurm.cluster import ClusterFacts, Partition


def test_facts_22_05() -> None:
    facts = cluster.parse(CONFIG_22_05 + CONFIG_22_05_MORE, PARTITION_22_05, NODE_22_05)
    assert facts.config_read and facts.why_missing == ""
    assert (facts.version, facts.version_tuple(), facts.task_plugin, facts.proctrack) == (
        "22.05.8",
        (22, 5),
        "task/none",
        "proctrack/linuxproc",
    )
    assert (facts.preempt_type, facts.ctld_parameters) == ("preempt/partition_prio", "preempt_send_user_signal")
    assert (facts.job_requeue, facts.cred_expire_s, facts.max_array_size) == (1, 5, 1001)
    assert facts.partitions[0] == Partition(
        name="debug",
        default=True,
        state="UP",
        total_nodes=2,
        max_time="UNLIMITED",
        preempt_mode="REQUEUE",
        grace_s=10,
        hosts="node[1-2]",
    )
    assert [(p.name, p.preempt_mode, p.grace_s) for p in facts.partitions[1:]] == [
        ("lowprio", "CANCEL", 10),
        ("urgent", "OFF", 0),
    ]
    assert [(n.name, n.gres, n.gpus, n.partitions) for n in facts.nodes] == [
        ("node1", "(null)", 0, ("debug", "lowprio", "urgent", "scale"))
    ]


def test_facts_24_11() -> None:
    facts = cluster.parse(CONFIG_SECTIONED, PARTITION_24_11)
    assert (facts.version_tuple(), facts.job_requeue, facts.task_plugin) == ((24, 11), 0, "task/cgroup,task/affinity")
    (part,) = facts.partitions
    assert (part.name, part.default, part.state, part.total_nodes, part.max_time, part.preempt_mode) == (
        "debug",
        True,
        "UP",
        49,
        "UNLIMITED",
        "REQUEUE",
    )
    assert facts.nodes == ()  # not asked


def test_keys_in_other_capitals_read_the_same() -> None:
    """The requeue mode's old parser matched `^JobRequeue` and `PartitionName`/`Default`/`PreemptMode` exactly:
    a site whose scontrol spells a key's capitals otherwise got "facts not available" and the default partition
    went unseen."""
    config = "Configuration data as of now\njobRequeue = 0\nSLURM_Version = 24.11.5\nMAXARRAYSIZE = 40\n"
    parts = "partitionName=p1 default=YES preemptMode=CANCEL totalNodes=3 maxTime=1-00:00:00 state=UP\n"
    facts = cluster.parse(config, parts)
    assert (facts.job_requeue, facts.version, facts.max_array_size) == (0, "24.11.5", 40)
    part = facts.partition(None)
    assert part is not None and (part.name, part.preempt_mode, part.total_nodes, part.max_time) == (
        "p1",
        "CANCEL",
        3,
        "1-00:00:00",
    )


@pytest.mark.parametrize(("wanted", "found"), [(None, "debug"), ("lowprio", "lowprio"), ("gone", None), ("", "debug")])
def test_partition_named_or_default(wanted: str | None, found: str | None) -> None:
    facts = cluster.parse(CONFIG_22_05, PARTITION_22_05)
    part = facts.partition(wanted or None)
    assert (part.name if part else None) == found
    assert ClusterFacts().partition(wanted) is None


def test_show_job_reads_keys_with_slashes_and_values_with_spaces() -> None:
    fields = commands.parse_scontrol_job(JOB_22_05)
    assert (fields["JobState"], fields["Reason"], fields["NodeList"], fields["RunTime"]) == (
        "PENDING",
        "JobHeldUser",
        "",
        "00:00:00",
    )
    assert (fields["NumTasks"], fields["CPUs/Task"], fields["ExitCode"]) == ("1", "1", "0:0")
    assert fields["TRES"] == "cpu=1,mem=2G,node=1,billing=1"
    assert fields.get("jobstate") == "PENDING" and fields.get("NoSuchKey", "") == ""  # any capitals
    spaced = commands.parse_scontrol_job("JobId=5 Command=/a b/job.sbatch /runs/x 3 WorkDir=/a b\n")
    assert (spaced["Command"], spaced["WorkDir"]) == ("/a b/job.sbatch /runs/x 3", "/a b")


class Controller:
    """Our Runner seam: scontrol answering with captured text after `delay_s`, each call recorded."""

    def __init__(self, together: int = 1, fail: str | None = None, **texts: str) -> None:
        # `together` > 1: each answer waits until that many questions are open at once (a barrier), so a
        # gather that asked one after another fails instead of passing slowly.
        self.barrier = threading.Barrier(together, timeout=10)
        self.fail, self.texts = fail, texts
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(tuple(argv))
        self.barrier.wait()
        if argv[2] == self.fail:
            return Completed(tuple(argv), 1, "", "slurm_load_partitions: Unable to contact slurm controller")
        return Completed(tuple(argv), 0, self.texts.get(argv[2], ""), "")


def test_gather_asks_each_question_once_and_all_at_once() -> None:
    controller = Controller(together=3, config=CONFIG_22_05, partition=PARTITION_22_05, node=NODE_22_05)
    facts = cluster.gather(controller, with_nodes=True)
    assert sorted(controller.calls) == [
        ("scontrol", "show", "config"),
        ("scontrol", "show", "node", "-o"),
        ("scontrol", "show", "partition", "-o"),
    ]
    assert facts == cluster.parse(CONFIG_22_05, PARTITION_22_05, NODE_22_05)


def test_gather_without_nodes_asks_two() -> None:
    controller = Controller(together=2, config=CONFIG_22_05, partition=PARTITION_22_05)
    assert cluster.gather(controller).partitions == cluster.parse_partitions(PARTITION_22_05)
    assert sorted(controller.calls) == [("scontrol", "show", "config"), ("scontrol", "show", "partition", "-o")]


def test_an_unanswered_question_is_said() -> None:
    facts = cluster.gather(Controller(fail="partition", config=CONFIG_22_05))
    assert facts.config_read and facts.job_requeue == 1 and facts.partitions == ()
    assert facts.why_missing == (
        "scontrol show partition -o failed: slurm_load_partitions: Unable to contact slurm controller"
    )
    refused = cluster.gather(Controller(fail="config", partition=PARTITION_22_05))
    assert not refused.config_read and refused.job_requeue is None and len(refused.partitions) == 3


def test_no_scontrol_leaves_every_fact_unknown() -> None:
    def missing(argv: Sequence[str]) -> Completed:
        from ddpctl.errors import CommandError

        raise CommandError(f"command not found: {argv[0]!r}")

    facts = cluster.gather(missing)
    assert facts == ClusterFacts(why_missing="command not found: 'scontrol'")


def test_gather_here_without_scontrol_on_path_tries_nothing_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no scontrol
    assert cluster.gather_here(with_nodes=True) == ClusterFacts(why_missing="scontrol is not on PATH")
