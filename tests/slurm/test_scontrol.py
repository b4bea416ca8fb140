"""Parsers of scontrol's config, partition and node listings: real lines from the test cluster (Slurm 22.05.8,
the first configuration) and the spellings other versions print."""

from __future__ import annotations

import pytest
from scontrol_output import CONFIG_22_05, CONFIG_SECTIONED, NODE_22_05, PARTITION_22_05, PARTITION_24_11

from ddpctl.slurm import cluster, scontrol


def test_config_22_05() -> None:
    config = scontrol.parse_config(CONFIG_22_05)
    assert config["SLURM_VERSION"] == "22.05.8"
    assert config["TaskPlugin"] == "task/none"
    assert config["TaskPluginParam"] == "(null type)"
    assert config["PowerPlugin"] == ""
    assert config.find("jobrequeue") == "1"  # case-insensitive lookup
    assert "Slurmctld(primary) at ddpctl-ctl is UP" not in config.values()
    assert config.find("NoSuchKey") is None


def test_config_sections_do_not_override() -> None:
    config = scontrol.parse_config(CONFIG_SECTIONED)
    assert (config["JobRequeue"], config["TaskPlugin"], config["ConstrainCores"]) == (
        "0",
        "task/cgroup,task/affinity",
        "yes",
    )
    assert "Cgroup Support Configuration:" not in "".join(config)


def test_partitions_22_05() -> None:
    parts = cluster.parse_partitions(PARTITION_22_05)
    assert [(p.name, p.default, p.preempt_mode, p.grace_s, p.hosts) for p in parts] == [
        ("debug", True, "REQUEUE", 10, "node[1-2]"),
        ("lowprio", False, "CANCEL", 10, "node[1-2]"),
        ("urgent", False, "OFF", 0, "node[1-2]"),
    ]


def test_partition_24_11() -> None:
    (part,) = cluster.parse_partitions(PARTITION_24_11)
    assert (part.name, part.default, part.preempt_mode, part.grace_s, part.hosts) == (
        "debug",
        True,
        "REQUEUE",
        0,
        "snowflake[0-48]",
    )


def test_node_values_with_spaces_and_equals() -> None:
    fields = scontrol.parse_line_fields(NODE_22_05.strip())
    assert fields["OS"] == "Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0"
    assert fields["CfgTRES"] == "cpu=2,mem=4G,billing=2"
    assert fields["AllocTRES"] == ""
    assert fields["Partitions"] == "debug,lowprio,urgent,scale"
    (node,) = cluster.parse_node_records(NODE_22_05)
    assert (node.name, node.partitions, node.gres, node.gpus) == (
        "node1",
        ("debug", "lowprio", "urgent", "scale"),
        "(null)",
        0,
    )


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("(null)", 0),
        ("", 0),
        ("gpu:4", 4),
        ("gpu:a100:4", 4),
        ("gpu:a100:2(S:0-1),gpu:t4:1(S:0)", 3),
        ("gpu:tesla:8(S:0-1),nvme:1", 8),
        ("mps:100,gpu:2", 2),
        ("gpu", 0),
    ],
)
def test_gres_gpus(gres: str, gpus: int) -> None:
    assert scontrol.gres_gpus(gres) == gpus


@pytest.mark.parametrize(
    ("text", "version"),
    [("22.05.8", (22, 5)), ("24.11.5", (24, 11)), ("slurm-wlm 23.02.7", (23, 2)), ("", None), (None, None)],
)
def test_version(text: str | None, version: tuple[int, int] | None) -> None:
    assert scontrol.version(text) == version


@pytest.mark.parametrize(("text", "seconds"), [("10", 10), ("0", 0), ("", None), ("UNLIMITED", None)])
def test_seconds(text: str, seconds: int | None) -> None:
    assert scontrol.seconds(text) == seconds
