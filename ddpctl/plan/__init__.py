"""From a checked spec to what gets submitted (pure): the frozen `SubmissionPlan`.

    JobSpec ──submission.build──▶ SubmissionPlan ──▶ backends/ submit it as it is; `submit --dry-run` prints it
                 ├─ render:    the batch script, from its template          (sbatch backend)
                 ├─ executor:  submitit's executor parameters               (submitit backend)
                 └─ node.torchrun.node_plan: each node's torchrun argv and env (every backend)

`preflight`, `requeue_mode`, `clusterfacts` and `doctor` are pure functions of the cluster's facts
(ddpctl.slurm.cluster.ClusterFacts, gathered once at the edge) and, for `doctor`, of this machine's facts
(gathered by ddpctl.cli.doctor).
"""
