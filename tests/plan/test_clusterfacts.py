"""`doctor`'s cluster facts: each `fact → consequence` line from literal scontrol output (real 22.05 lines from
the test cluster, and the production-like settings, read by ddpctl.slurm.cluster) and a spec; the same through the
Runner seam; and, against the real cluster, doctor's facts match what `scontrol show config` says right now."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from scontrol_output import CONFIG_22_05, NODE_22_05, PARTITION_22_05

from ddpctl.plan.clusterfacts import FAIL, OK, WARN, cluster_lines
from ddpctl.plan.doctor import Facts, evaluate
from ddpctl.proc import Completed
from ddpctl.slurm import cluster
from ddpctl.slurm.cluster import ClusterFacts
from ddpctl.spec import JobSpec


@dataclass(frozen=True)
class ClusterTexts:
    """What scontrol printed (show config, show partition -o, show node -o); None where it failed."""

    config: str | None = None
    partitions: str | None = None
    nodes: str | None = None

    def facts(self) -> ClusterFacts:
        return cluster.parse(self.config, self.partitions, self.nodes)


SPEC = JobSpec(name="x", script="t.py", nodes=2, time="00:30:00", partition="debug")
SCRIPT = 'srun --ntasks-per-node=1 --kill-on-bad-exit=1 python3 -m ddpctl launch "$RUN_DIR" &\n'
TEXTS = ClusterTexts(CONFIG_22_05, PARTITION_22_05, NODE_22_05)
PROD = (
    CONFIG_22_05.replace("task/none", "task/cgroup,task/affinity")
    .replace("proctrack/linuxproc", "proctrack/cgroup")
    .replace("select/linear", "select/cons_tres")
)
GPU_NODES = NODE_22_05.replace("Gres=(null)", "Gres=gpu:4(S:0)") + NODE_22_05.replace("node1", "node2").replace(
    "Gres=(null)", "Gres=gpu:2"
)


def lines(spec: JobSpec = SPEC, texts: ClusterTexts = TEXTS, script: str | None = SCRIPT) -> dict[str, tuple[str, str]]:
    return {name: (status, detail) for status, name, detail in cluster_lines(spec, texts.facts(), script)}


def test_22_05_test_cluster_lines() -> None:
    assert lines() == {
        "slurm version": (OK, "22.05.8 → nothing ddpctl does depends on it except srun's --cpus-per-task (below)"),
        "task plugin": (
            OK,
            "TaskPlugin=task/none → no CPU binding: workers may use any CPU of the node (OMP_NUM_THREADS=1 per "
            "worker unless the spec sets it)",
        ),
        "proctrack": (
            OK,
            "ProctrackType=proctrack/linuxproc → processes are tracked by parentage: one that daemonizes escapes the "
            "stop signal and the job's cleanup (ddpctl's own processes do not)",
        ),
        "srun cpus": (
            OK,
            "srun does not inherit --cpus-per-task on 22.05.8 (22.05-23.02) → the spec sets no cpus_per_task: "
            "nothing to inherit",
        ),
        "job requeue": (OK, "JobRequeue=1 → requeue.mode auto lets the job requeue itself (scontrol requeue)"),
        "partition debug (default)": (
            OK,
            "PreemptMode=REQUEUE, GraceTime=10 s → USR2 on preemption, then requeue; the agreed checkpoint must "
            "finish within 10 s",
        ),
        "gres debug": (OK, "(null) x1 → gpus_per_node: 0, the job gets no GPU"),
    }


# (id, spec, texts, script, line name, status, fragment of the line)
Case = tuple[str, JobSpec, ClusterTexts, str | None, str, str, str]
CASES: list[Case] = [
    (
        "cgroup binding",
        SPEC,
        replace(TEXTS, config=PROD),
        SCRIPT,
        "task plugin",
        OK,
        "confined to the CPUs Slurm gives",
    ),
    ("proctrack cgroup", SPEC, replace(TEXTS, config=PROD), SCRIPT, "proctrack", OK, "every process of the launch"),
    (
        "22.05, cpus asked, not passed, bound",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD),
        SCRIPT,
        "srun cpus",
        WARN,
        "does not ask for cpus_per_task=8: with CPU binding the launch step may be bound to fewer CPUs",
    ),
    (
        "22.05, cpus asked, not passed, no binding",
        replace(SPEC, cpus_per_task=8),
        TEXTS,
        SCRIPT,
        "srun cpus",
        OK,
        "(no binding here)",
    ),
    (
        "22.05, cpus asked, launcher unbound",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD),
        SCRIPT.replace("srun ", "srun --cpu-bind=none "),
        "srun cpus",
        OK,
        "runs the launcher unbound (--cpu-bind=none): its workers share the CPUs the job holds on the node",
    ),
    (
        "22.05, script exports SRUN_CPUS_PER_TASK",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD),
        "export SRUN_CPUS_PER_TASK=8\n" + SCRIPT,
        "srun cpus",
        OK,
        "passes cpus_per_task=8 to srun itself",
    ),
    (
        "22.05, srun passes it",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD),
        "srun --cpus-per-task=8 --ntasks-per-node=1 x\n",
        "srun cpus",
        OK,
        "passes cpus_per_task=8",
    ),
    (
        "24.11 inherits",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD.replace("22.05.8", "24.11.5")),
        SCRIPT,
        "srun cpus",
        OK,
        "srun inherits --cpus-per-task on 24.11.5 (it reads SLURM_CPUS_PER_TASK) → the launch step gets "
        "cpus_per_task=8",
    ),
    (
        "21.08 inherits",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD.replace("22.05.8", "21.08.8")),
        SCRIPT,
        "srun cpus",
        OK,
        "srun inherits",
    ),
    (
        "23.02 does not",
        replace(SPEC, cpus_per_task=8),
        replace(TEXTS, config=PROD.replace("22.05.8", "23.02.7")),
        SCRIPT,
        "srun cpus",
        WARN,
        "does not inherit --cpus-per-task on 23.02.7",
    ),
    (
        "submitit: no script",
        replace(SPEC, cpus_per_task=8, backend="submitit"),
        TEXTS,
        None,
        "srun cpus",
        OK,
        "backend submitit starts the nodes itself",
    ),
    (
        "no JobRequeue",
        SPEC,
        replace(TEXTS, config=CONFIG_22_05.replace("JobRequeue ", "Xx ")),
        SCRIPT,
        "job requeue",
        WARN,
        "assumes requeue works",
    ),
    (
        "JobRequeue=0",
        SPEC,
        replace(TEXTS, config=CONFIG_22_05.replace("= 1\n", "= 0\n", 1)),
        SCRIPT,
        "job requeue",
        OK,
        "JobRequeue=0 → requeue.mode auto continues the run in a chained successor job",
    ),
    (
        "CANCEL partition",
        replace(SPEC, partition="lowprio"),
        TEXTS,
        SCRIPT,
        "partition lowprio",
        OK,
        "PreemptMode=CANCEL, GraceTime=10 s → a preempted job is cancelled: requeue.mode auto chains",
    ),
    ("OFF partition", replace(SPEC, partition="urgent"), TEXTS, SCRIPT, "partition urgent", OK, "not preempted"),
    (
        "no user signal on preemption",
        SPEC,
        replace(TEXTS, config=CONFIG_22_05.replace("preempt_send_user_signal", "(null)")),
        SCRIPT,
        "partition debug (default)",
        WARN,
        "preemption sends SIGTERM, not USR2 (no preempt_send_user_signal in SlurmctldParameters)",
    ),
    (
        "GraceTime 0",
        SPEC,
        replace(TEXTS, partitions=PARTITION_22_05.replace("GraceTime=10", "GraceTime=0")),
        SCRIPT,
        "partition debug (default)",
        WARN,
        "USR2 then SIGKILL at once",
    ),
    (
        "suspend",
        SPEC,
        replace(TEXTS, partitions=PARTITION_22_05.replace("PreemptMode=REQUEUE", "PreemptMode=SUSPEND,GANG")),
        SCRIPT,
        "partition debug (default)",
        OK,
        "suspended and resumed in place",
    ),
    (
        "GPUs fit",
        replace(SPEC, gpus_per_node=2, nproc_per_node=2),
        replace(TEXTS, nodes=GPU_NODES),
        SCRIPT,
        "gres debug",
        OK,
        "gpu:2 x1, gpu:4(S:0) x1 → gpus_per_node=2: 2 node(s) have that many, one rank per GPU",
    ),
    (
        "GPUs do not fit",
        replace(SPEC, gpus_per_node=4, nproc_per_node=4),
        replace(TEXTS, nodes=GPU_NODES),
        SCRIPT,
        "gres debug",
        FAIL,
        "gpus_per_node=4 on 2 node(s), but only 1 node(s) here have 4 GPUs: the job can never start",
    ),
    (
        "GPUs there, none asked",
        SPEC,
        replace(TEXTS, nodes=GPU_NODES),
        SCRIPT,
        "gres debug",
        OK,
        "the job gets no GPU (2 node(s) have GPUs)",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fact_lines(case: Case) -> None:
    _, spec, texts, script, name, status, fragment = case
    got = lines(spec, texts, script)
    assert got[name][0] == status, got[name]
    assert fragment in got[name][1]


def test_every_partition_when_the_spec_names_none() -> None:
    names = [name for _, name, _ in cluster_lines(replace(SPEC, partition=None), TEXTS.facts(), SCRIPT)]
    assert [n for n in names if n.startswith(("partition", "gres"))] == [
        "partition debug (default)",
        "gres debug",
        "partition lowprio",
        "gres lowprio",
        "partition urgent",
        "gres urgent",
    ]


def test_local_and_missing() -> None:
    assert cluster_lines(replace(SPEC, backend="local"), ClusterFacts(), None) == [
        (OK, "cluster", "local backend: no Slurm facts apply")
    ]
    assert cluster_lines(SPEC, ClusterFacts(why_missing="scontrol is not on PATH"), SCRIPT) == [
        (WARN, "cluster", "no facts: scontrol is not on PATH")
    ]


class FakeScontrol:
    """Our Runner seam: answers the three scontrol calls with captured text."""

    def __init__(self, texts: ClusterTexts, fail: str | None = None) -> None:
        self.texts, self.fail = texts, fail
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(tuple(argv))
        if argv[2] == self.fail:
            return Completed(tuple(argv), 1, "", "slurm_load_partitions: Unable to contact slurm controller")
        text = {"config": self.texts.config, "partition": self.texts.partitions, "node": self.texts.nodes}[argv[2]]
        return Completed(tuple(argv), 0, text or "", "")


def test_gather_through_the_runner() -> None:
    fake = FakeScontrol(TEXTS)
    assert cluster.gather(fake, with_nodes=True) == TEXTS.facts()
    assert sorted(fake.calls) == [
        ("scontrol", "show", "config"),
        ("scontrol", "show", "node", "-o"),
        ("scontrol", "show", "partition", "-o"),
    ]
    failed = cluster.gather(FakeScontrol(TEXTS, fail="partition"), with_nodes=True)
    assert failed.partitions == ()
    assert [line for line in cluster_lines(SPEC, failed, SCRIPT) if line[1] == "partitions"] == [
        (WARN, "partitions", failed.why_missing)
    ]
    assert failed.why_missing == (
        "scontrol show partition -o failed: slurm_load_partitions: Unable to contact slurm controller"
    )


def test_doctor_shows_the_lines() -> None:
    facts = Facts(tools={}, cluster=TEXTS.facts(), script=SCRIPT)
    names = [c.name for c in evaluate(SPEC, facts)]
    assert names[-7:] == list(lines())


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slurm
def test_doctor_facts_match_the_live_cluster(tmp_path: Path) -> None:
    """Whatever configuration the cluster runs now (22.05 or 24.11, task/none or task/cgroup), doctor says it."""
    from clitools import Cli

    live = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    wanted = {}
    for key in ("SLURM_VERSION", "TaskPlugin", "ProctrackType", "JobRequeue"):
        match = re.search(rf"^{key}\s*=\s*(\S+)", live, re.MULTILINE)
        assert match, f"{key} not in scontrol show config"
        wanted[key] = match.group(1)
    part = subprocess.run(
        ["scontrol", "show", "partition", "-o", "debug"], capture_output=True, text=True, check=True
    ).stdout
    mode = re.search(r"\bPreemptMode=(\S+)", part)
    grace = re.search(r"\bGraceTime=(\S+)", part)
    assert mode and grace, part
    out = Cli(tmp_path / "home").run("doctor", str(ROOT / "jobs" / "example.yaml"), check=False).stdout
    assert f"slurm version: {wanted['SLURM_VERSION']} → " in out, out
    assert f"task plugin: TaskPlugin={wanted['TaskPlugin']} → " in out, out
    assert f"proctrack: ProctrackType={wanted['ProctrackType']} → " in out, out
    assert f"job requeue: JobRequeue={wanted['JobRequeue']} → " in out, out
    assert f"partition debug (default): PreemptMode={mode.group(1)}, GraceTime={grace.group(1)} s → " in out, out
    assert re.search(r"\] gres debug: .+ → ", out), out
