"""ddpctl.node.chain (pure parts with literal event tables; submit/drop through a recording Runner at our seam)
and ddpctl.plan.requeue_mode (the auto choice from literal cluster facts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.node import chain
from ddpctl.node.chain import Refusal
from ddpctl.plan.requeue_mode import pick
from ddpctl.proc import Completed
from ddpctl.run import history
from ddpctl.run.history import ChainSubmitted, Decided, RunHistory
from ddpctl.run.layout import RunLayout
from ddpctl.slurm import cluster
from ddpctl.slurm.cluster import ClusterFacts, Partition
from ddpctl.spec import JobSpec, RequeuePolicy

EVENTS = [
    {"event": "chain-submit", "attempt": 0, "job_id": "11"},
    {"event": "decision", "attempt": 0, "action": "requeue"},
    {"event": "chain-submit", "attempt": 1, "job_id": "12"},
    {"event": "chain-drop", "attempt": 1, "job_id": "12"},
]


def test_chain_jobs_and_successors() -> None:
    past = RunHistory.from_records(EVENTS)
    assert past.chain_jobs("10") == ["10", "11"]
    assert RunHistory().chain_jobs("10") == ["10"]
    assert past.successor_of(0) == "11"
    assert past.successor_of(1) is None  # dropped again
    assert past.successor_of(2) is None


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> Completed:
        self.calls.append(list(argv))
        return Completed(tuple(argv), 0, "77\n" if argv[0] == "sbatch" else "", "")


def test_submit_successor_once_per_attempt_and_never_after_cancel(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    runner, env = Recorder(), {"SLURM_JOB_ID": "10", "DDPCTL_CHAIN_ATTEMPT": "2"}
    assert chain.submit_successor(layout, env, "preemption signal", runner) == "77"
    assert runner.calls == [
        [
            "sbatch",
            "--parsable",
            "--dependency=afterany:10",
            f"--output={tmp_path}/slurm.out",
            "--open-mode=append",
            f"{tmp_path}/job.sbatch",
            str(tmp_path),
            "3",
        ]
    ]
    assert chain.submit_successor(layout, env, "requeue decision", runner) == "77"
    assert len(runner.calls) == 1  # the signal already submitted it
    submitted = history.load(layout.events).all(ChainSubmitted)
    assert [(e.attempt, e.job_id, e.next_attempt) for e in submitted] == [(2, "77", 3)]
    assert chain.drop_successor(layout, env, "the run finished", runner) == "77"
    assert runner.calls[-1] == ["scancel", "77"]
    layout.cancel_request.write_text("{}")
    assert chain.submit_successor(layout, {**env, "DDPCTL_CHAIN_ATTEMPT": "3"}, "x", runner) is None
    assert len(runner.calls) == 2


def test_may_start(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    env = {"DDPCTL_CHAIN_ATTEMPT": "1"}
    assert chain.may_start(layout, env) is None
    history.append(layout.events, Decided(attempt=0, action="requeue", reason="preemption: requeue 1 of 10"))
    assert chain.may_start(layout, env) is None
    history.append(layout.events, Decided(attempt=0, action="finish", reason="training completed", exit_code=0))
    assert chain.may_start(layout, env) == Refusal("the run already finished in attempt 0 (training completed)", 0)
    layout.cancel_request.write_text("{}")
    assert chain.may_start(layout, env) == Refusal("the run was cancelled", 0)


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"reason": "training completed", "exit_code": 0}, 0),
        ({"reason": "failure: exit 1, no failure requeues allowed", "exit_code": 1}, 1),
        ({"reason": "preemption budget spent", "exit_code": 76}, 76),
        ({"reason": "from a run dir without the status"}, 1),  # unknown: never claimed a success
        ({"reason": "damaged", "exit_code": "0"}, 1),
        ({"reason": "damaged", "exit_code": 300}, 1),
    ],
)
def test_a_refused_start_exits_with_the_runs_own_status(tmp_path: Path, fields: dict[str, object], status: int) -> None:
    layout = RunLayout(tmp_path)
    # Written as records, not typed events: the damaged ones are what an older ddpctl or a hand edit may leave.
    record = {"event": "decision", "t": 1.0, "attempt": 1, "action": "finish", **fields}
    layout.events.write_text(json.dumps(record) + "\n")
    refusal = chain.may_start(layout, {"SLURM_RESTART_COUNT": "2"})
    assert refusal is not None and refusal.exit_code == status


CONFIG = "Configuration data as of ...\nJobCompType             = jobcomp/filetxt\nJobRequeue              = 0\n"
PARTS = (
    "PartitionName=debug AllowGroups=ALL Default=YES PriorityTier=1 PreemptMode=REQUEUE State=UP\n"
    "PartitionName=lowprio Default=NO PreemptMode=CANCEL State=UP\n"
    "PartitionName=urgent Default=NO PreemptMode=OFF State=UP\n"
)


def test_parse_cluster_facts() -> None:
    parsed = cluster.parse(CONFIG, PARTS)
    assert parsed.job_requeue == 0 and cluster.parse("nothing", None).job_requeue is None

    def chosen(wanted: str | None) -> tuple[str, str | None] | None:
        part = parsed.partition(wanted)
        return (part.name, part.preempt_mode) if part else None

    assert chosen(None) == ("debug", "REQUEUE")
    assert chosen("lowprio") == ("lowprio", "CANCEL")
    assert chosen("gone") is None


def facts(
    job_requeue: int | None = None, partition: str = "", preempt_mode: str | None = None, cred: int | None = 5
) -> ClusterFacts:
    """Cluster facts with JobRequeue, cred_expire (None: not set, Slurm's 120) and one default partition (none
    when it has no name)."""
    part = Partition(partition, True, "UP", 2, "UNLIMITED", preempt_mode, 10)
    parts = (part,) if partition else ()
    return ClusterFacts(job_requeue is not None, job_requeue=job_requeue, cred_expire_s=cred, partitions=parts)


def spec(mode: str = "auto", backend: str = "sbatch") -> JobSpec:
    return JobSpec(name="x", script="t.py", backend=backend, requeue=RequeuePolicy(mode=mode))


@pytest.mark.parametrize(("mode", "backend", "known", "chosen", "why"), [
    ("auto", "sbatch", facts(1, "debug", "REQUEUE"), "requeue", "JobRequeue=1, partition debug PreemptMode"),
    ("auto", "sbatch", facts(0, "debug", "REQUEUE"), "chain", "JobRequeue=0 in the cluster's config"),
    ("auto", "sbatch", facts(1, "lowprio", "CANCEL"), "chain", "partition lowprio has PreemptMode=CANCEL"),
    ("auto", "sbatch", facts(1, "p", "GANG,CANCEL"), "chain", "PreemptMode=CANCEL"),
    ("auto", "sbatch", facts(), "requeue", "cluster facts not available here"),
    ("requeue", "sbatch", facts(0, "lowprio", "CANCEL"), "requeue", "requeue.mode: requeue in the spec"),
    ("chain", "sbatch", facts(1, "debug", "REQUEUE"), "chain", "requeue.mode: chain in the spec"),
    ("auto", "local", facts(), "requeue", "local backend"),
    ("chain", "local", facts(), "chain", "local backend"),
    ("auto", "submitit", facts(1, "debug", "REQUEUE"), "requeue", "JobRequeue=1"),
    # The requeue hold (cred_expire + 1 s): from 30 s on, a chained successor (not held) is the faster path.
    ("auto", "sbatch", facts(1, "debug", "REQUEUE", None), "chain", "a requeued job is held 121 s here"),
    ("auto", "sbatch", facts(1, "debug", "REQUEUE", 29), "chain", "held 30 s here (cred_expire + 1)"),
    ("auto", "sbatch", facts(1, "debug", "REQUEUE", 28), "requeue", "JobRequeue=1, partition debug"),
    ("auto", "submitit", facts(1, "debug", "REQUEUE", None), "requeue", "JobRequeue=1"),
    ("requeue", "sbatch", facts(1, "debug", "REQUEUE", None), "requeue", "requeue.mode: requeue in the spec"),
    ("auto", "local", facts(1, "debug", "REQUEUE", None), "requeue", "local backend"),
])  # fmt: skip
def test_pick(mode: str, backend: str, known: ClusterFacts, chosen: str, why: str) -> None:
    got, reason = pick(spec(mode, backend), known)
    assert got == chosen and why in reason


@pytest.mark.parametrize(
    ("mode", "known"),
    [("chain", facts()), ("auto", facts(0)), ("auto", facts(1, "lowprio", "CANCEL"))],
)
def test_submitit_cannot_chain(mode: str, known: ClusterFacts) -> None:
    with pytest.raises(SpecError, match="the submitit backend can only requeue"):
        pick(spec(mode, "submitit"), known)


@pytest.mark.parametrize(
    ("partition", "chosen", "why"),
    [
        (None, "requeue", "JobRequeue=1, partition debug PreemptMode=REQUEUE"),
        ("lowprio", "chain", "partition lowprio has PreemptMode=CANCEL"),
        ("urgent", "requeue", "partition urgent PreemptMode=OFF"),
        ("gone", "requeue", "JobRequeue=1, no CANCEL"),
    ],
)
def test_pick_reads_the_specs_partition_of_the_22_05_facts(partition: str | None, chosen: str, why: str) -> None:
    from scontrol_output import CONFIG_22_05, CONFIG_22_05_MORE, PARTITION_22_05

    known = cluster.parse(CONFIG_22_05 + CONFIG_22_05_MORE, PARTITION_22_05)  # the test cluster's cred_expire=5
    got, reason = pick(JobSpec(name="x", script="t.py", partition=partition), known)
    assert got == chosen and why in reason, reason


@pytest.mark.parametrize(
    ("records", "options"),
    [
        ([], ["--dependency=afterany:10"]),
        ([{"event": "node-lost", "attempt": 2, "node": "node2"}], []),  # Slurm holds job 10 until SlurmdTimeout
        ([{"event": "node-lost", "attempt": 1, "node": "node2"}], ["--dependency=afterany:10"]),  # an earlier one
        ([{"event": "hang", "attempt": 2}], ["--dependency=afterany:10"]),
    ],
)
def test_only_the_successor_after_a_lost_node_depends_on_nothing(
    records: list[dict[str, object]], options: list[str]
) -> None:
    assert chain.dependency(RunHistory.from_records(records), 2, "10") == options
