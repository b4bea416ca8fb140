"""The cluster facts that change what ddpctl does, for `doctor`: one line each, `fact → consequence`.

The lines are a pure function of the spec and the cluster's facts (`report`; the facts are gathered once, at the
edge, by ddpctl.slurm.cluster), tested with real captured output.

srun and --cpus-per-task, by Slurm version (Slurm's release notes; srun(1) of 22.05.8 and 24.11.5 agree): before
22.05 srun read SLURM_CPUS_PER_TASK, so a step inherited the job's value; 22.05 stopped that (srun(1) 22.05.8
reads SRUN_CPUS_PER_TASK only: pass it to srun, or export that); 23.11 walked it back (srun(1) 24.11.5 reads
SLURM_CPUS_PER_TASK again, and has --external-launcher for launchers like ours).
"""

from __future__ import annotations

import re
from collections import Counter

from ddpctl.slurm.cluster import ClusterFacts, Node, Partition
from ddpctl.spec import JobSpec

OK, WARN, FAIL = "ok", "warn", "fail"
Line = tuple[str, str, str]  # (status, name, "fact → consequence")


def srun_inherits_cpus(version: tuple[int, int] | None) -> bool | None:
    if version is None:
        return None
    return version < (22, 5) or version >= (23, 11)


def _passes_cpus(script: str | None) -> bool:
    text = script or ""
    return "SRUN_CPUS_PER_TASK" in text or re.search(r"^\s*srun\b[^\n]*--cpus-per-task", text, re.M) is not None


def version_line(facts: ClusterFacts) -> Line:
    raw = facts.version or "unknown"
    return OK, "slurm version", f"{raw} → nothing ddpctl does depends on it except srun's --cpus-per-task (below)"


def task_plugin_line(spec: JobSpec, facts: ClusterFacts) -> Line:
    from ddpctl.node.torchrun import omp_threads

    plugin = facts.task_plugin or "unknown"
    threads = f"OMP_NUM_THREADS={omp_threads(spec)} per worker unless the spec sets it"
    if "affinity" in plugin or "cgroup" in plugin:
        return (
            OK,
            "task plugin",
            (
                f"TaskPlugin={plugin} → each node's launcher, torchrun and workers are confined to the CPUs "
                f"Slurm gives the launch step, and share them ({threads})"
            ),
        )
    return OK, "task plugin", f"TaskPlugin={plugin} → no CPU binding: workers may use any CPU of the node ({threads})"


def proctrack_line(facts: ClusterFacts) -> Line:
    plugin = facts.proctrack or "unknown"
    if plugin.endswith("cgroup"):
        consequence = (
            "every process of the launch step is in its cgroup: the stop signal reaches the launcher, torchrun and "
            "every worker (they inherit it as ignored and stop through the stop file), and none outlives the job"
        )
    elif plugin.endswith("linuxproc"):
        consequence = (
            "processes are tracked by parentage: one that daemonizes escapes the stop signal and the job's cleanup "
            "(ddpctl's own processes do not)"
        )
    elif plugin.endswith("pgid"):
        consequence = "processes are tracked by process group: a worker that calls setsid escapes signals and cleanup"
    else:
        consequence = "not a plugin ddpctl is tested with"
    return (OK if plugin != "unknown" else WARN), "proctrack", f"ProctrackType={plugin} → {consequence}"


def cpus_line(spec: JobSpec, facts: ClusterFacts, script: str | None) -> Line:
    raw = facts.version
    inherits = srun_inherits_cpus(facts.version_tuple())
    fact = {
        True: f"srun inherits --cpus-per-task on {raw} (it reads SLURM_CPUS_PER_TASK)",
        False: f"srun does not inherit --cpus-per-task on {raw} (22.05-23.02)",
        None: "unknown whether srun inherits --cpus-per-task (no Slurm version)",
    }[inherits]
    if spec.cpus_per_task is None:
        return OK, "srun cpus", f"{fact} → the spec sets no cpus_per_task: nothing to inherit"
    if inherits:
        return OK, "srun cpus", f"{fact} → the launch step gets cpus_per_task={spec.cpus_per_task}"
    if _passes_cpus(script):
        return OK, "srun cpus", f"{fact} → the batch script passes cpus_per_task={spec.cpus_per_task} to srun itself"
    if script is None:
        return OK, "srun cpus", f"{fact} → backend {spec.backend} starts the nodes itself (no batch script)"
    if re.search(r"^\s*srun\b[^\n]*--cpu-bind=none", script, re.M):
        return (
            OK,
            "srun cpus",
            (
                f"{fact} → the batch script's srun runs the launcher unbound (--cpu-bind=none): its workers share the "
                "CPUs the job holds on the node"
            ),
        )
    bound = "cgroup" in (facts.task_plugin or "") or "affinity" in (facts.task_plugin or "")
    return (
        (WARN if bound else OK),
        "srun cpus",
        (
            f"{fact} → the batch script's srun does not ask for cpus_per_task={spec.cpus_per_task}"
            + (": with CPU binding the launch step may be bound to fewer CPUs" if bound else " (no binding here)")
        ),
    )


def requeue_line(facts: ClusterFacts) -> Line:
    raw = facts.job_requeue
    if raw is None:
        return WARN, "job requeue", "JobRequeue not in scontrol show config → requeue.mode auto assumes requeue works"
    if raw == 0:
        return OK, "job requeue", "JobRequeue=0 → requeue.mode auto continues the run in a chained successor job"
    return OK, "job requeue", f"JobRequeue={raw} → requeue.mode auto lets the job requeue itself (scontrol requeue)"


def _on_requeue(spec: JobSpec, facts: ClusterFacts, grace: int | None) -> tuple[str, str]:
    signal = spec.requeue.signal
    if "preempt_send_user_signal" not in (facts.ctld_parameters or ""):
        return WARN, (
            f"preemption sends SIGTERM, not {signal} (no preempt_send_user_signal in SlurmctldParameters): workers "
            "end without an agreed checkpoint; the requeued job resumes from the last one saved"
        )
    if not grace:
        return WARN, f"{signal} then SIGKILL at once: no time to agree a checkpoint"
    return OK, f"{signal} on preemption, then requeue; the agreed checkpoint must finish within {grace} s"


def preemption_line(spec: JobSpec, facts: ClusterFacts, part: Partition) -> Line:
    mode = (part.preempt_mode or "unknown").upper()
    grace = part.grace_s
    fact = f"PreemptMode={mode}, GraceTime={'?' if grace is None else grace} s"
    name = f"partition {part.name}" + (" (default)" if part.default else "")
    if (facts.preempt_type or "").endswith("none") or mode == "OFF":
        return OK, name, f"{fact} → jobs here are not preempted"
    if "CANCEL" in mode.split(","):
        return OK, name, f"{fact} → a preempted job is cancelled: requeue.mode auto chains a successor job"
    if "REQUEUE" in mode.split(","):
        status, consequence = _on_requeue(spec, facts, grace)
        return status, name, f"{fact} → {consequence}"
    if "SUSPEND" in mode or "GANG" in mode:
        return OK, name, f"{fact} → a preempted job is suspended and resumed in place: no stop, no checkpoint"
    return WARN, name, f"{fact} → not a mode ddpctl is tested with"


def gres_line(spec: JobSpec, part: Partition, nodes: tuple[Node, ...]) -> Line:
    mine = [n for n in nodes if part.name in n.partitions]
    kinds = Counter(n.gres for n in mine)
    fact = ", ".join(f"{gres} x{count}" for gres, count in sorted(kinds.items())) or "no nodes listed"
    name = f"gres {part.name}"
    want = spec.gpus_per_node
    fitting = sum(1 for n in mine if n.gpus >= want)
    if not want:
        with_gpus = sum(1 for n in mine if n.gpus)
        extra = f" ({with_gpus} node(s) have GPUs)" if with_gpus else ""
        return OK, name, f"{fact} → gpus_per_node: 0, the job gets no GPU{extra}"
    if fitting < spec.nodes:
        return (
            FAIL,
            name,
            (
                f"{fact} → gpus_per_node={want} on {spec.nodes} node(s), but only {fitting} node(s) here have {want} "
                "GPUs: the job can never start"
            ),
        )
    return OK, name, f"{fact} → gpus_per_node={want}: {fitting} node(s) have that many, one rank per GPU"


def cluster_lines(spec: JobSpec, facts: ClusterFacts, script: str | None) -> list[Line]:
    """One line per fact (pure)."""
    if not spec.capabilities.slurm:
        return [(OK, "cluster", f"{spec.backend} backend: no Slurm facts apply")]
    if not facts.config_read:
        return [(WARN, "cluster", f"no facts: {facts.why_missing or 'scontrol show config gave nothing'}")]
    lines = [
        version_line(facts),
        task_plugin_line(spec, facts),
        proctrack_line(facts),
        cpus_line(spec, facts, script),
        requeue_line(facts),
    ]
    chosen = [p for p in facts.partitions if p.name == spec.partition] if spec.partition else facts.partitions
    for part in chosen[:32]:  # bounded output on a site with hundreds of partitions
        lines.append(preemption_line(spec, facts, part))
        lines.append(gres_line(spec, part, facts.nodes))
    if not chosen:
        lines.append((WARN, "partitions", f"{facts.why_missing or 'scontrol show partition listed none'}"))
    return lines
