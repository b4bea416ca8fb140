"""The node side's one seam between a Slurm job step and the local backend's simulated nodes (ddpctl.node.site):
which site an environment is, and what each answers (literal tables; the room asked through an injected runner)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ddpctl.node.exclude import Room
from ddpctl.node.localenv import LOCAL_ENV_FLAG, MASTER_PORT_VAR, local_node_env
from ddpctl.node.site import LOCAL, SLURM, NodeSite, node_site
from ddpctl.proc import Completed
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec

SLURM_STEP = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_PARTITION": "gpu"}


@pytest.mark.parametrize(
    ("env", "site"),
    [
        ({}, "slurm"),  # nothing set: a step of one's own
        (SLURM_STEP, "slurm"),
        ({**SLURM_STEP, LOCAL_ENV_FLAG: "1"}, "local"),  # the local backend sets SLURM_* too, and its flag
        ({LOCAL_ENV_FLAG: ""}, "slurm"),  # an empty flag is no flag (as every caller tested it before)
        ({MASTER_PORT_VAR: "29600"}, "slurm"),  # only the flag chooses
    ],
)
def test_the_site_is_chosen_by_the_local_backends_flag_alone(env: dict[str, str], site: str) -> None:
    assert node_site(env).name == site


@pytest.mark.parametrize(
    ("site", "checks_gpus", "records_attempt_start", "job_id"),
    [
        (SLURM, True, True, "7"),  # the job running this attempt (a chained successor has its own)
        (LOCAL, False, False, "local-7"),  # the run directory's name, as every other record names the job
    ],
)
def test_what_each_site_answers(site: NodeSite, checks_gpus: bool, records_attempt_start: bool, job_id: str) -> None:
    assert (site.checks_gpus, site.records_attempt_start) == (checks_gpus, records_attempt_start)
    assert site.job_id(RunLayout(Path("/runs/local-7")), SLURM_STEP) == job_id


def spec() -> JobSpec:
    return JobSpec(name="site", script="train.py", nodes=2, nproc_per_node=3)


def test_the_local_site_puts_every_node_on_loopback_on_the_supervisors_port() -> None:
    env = local_node_env(spec(), 7, 0, 1, port=29611)
    dist = LOCAL.dist(spec(), env, resolve_addr=lambda host: "never asked")
    assert (dist.node_name, dist.node_rank, dist.nproc_per_node, dist.world_size) == ("local2", 1, 3, 6)
    assert (dist.master_addr, dist.master_port) == ("127.0.0.1", 29611)
    assert LOCAL.network(spec(), dist) == ("lo", "127.0.0.1")


def test_the_slurm_site_resolves_the_first_host_of_the_step() -> None:
    env = {
        **SLURM_STEP,
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NODEID": "1",
        "SLURMD_NODENAME": "n2",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "1",
        "SLURM_NTASKS": "2",
    }
    dist = SLURM.dist(spec(), env, resolve_addr=lambda host: {"n1": "10.0.0.1"}[host])
    assert (dist.node_name, dist.master_addr, dist.nproc_per_node) == ("n2", "10.0.0.1", 3)


class Scontrol:
    """The controller's answer to `scontrol show partition -o`, recording every question."""

    def __init__(self, stdout: str, returncode: int = 0) -> None:
        self.stdout, self.returncode, self.asked = stdout, returncode, list[tuple[str, ...]]()

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.asked.append(tuple(argv))
        return Completed(tuple(argv), self.returncode, self.stdout, "" if self.returncode == 0 else "down")


GIVEN = frozenset({"n9"})
PARTITIONS = "PartitionName=gpu TotalNodes=4 Nodes=n[1-4]\nPartitionName=cpu TotalNodes=2 Nodes=c[1-2]\n"


@pytest.mark.parametrize(
    ("site", "env", "answer", "room", "asked"),
    [
        (SLURM, SLURM_STEP, Scontrol(PARTITIONS), Room("gpu", 4, frozenset({"n1", "n2", "n3", "n4"}), GIVEN), 1),
        (SLURM, SLURM_STEP, Scontrol("", returncode=1), Room("gpu", given=GIVEN), 1),  # unknown: not answered
        (SLURM, {}, Scontrol(PARTITIONS), Room(None, given=GIVEN), 0),  # no partition named: nothing to ask
        (LOCAL, SLURM_STEP, Scontrol(PARTITIONS), Room(given=GIVEN), 0),  # no controller to ask
    ],
)
def test_the_room_to_exclude_a_node_in(
    site: NodeSite, env: dict[str, str], answer: Scontrol, room: Room, asked: int
) -> None:
    assert site.room(env, GIVEN, answer) == room
    assert answer.asked == [("scontrol", "show", "partition", "-o")] * asked
