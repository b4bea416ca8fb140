"""From a checked spec to what gets submitted (pure): the frozen `SubmissionPlan`.

    JobSpec ──submission.build──▶ SubmissionPlan ──▶ backends/ submit it as it is; `submit --dry-run` prints it
                 ├─ render:    the batch script, from its template          (sbatch backend)
                 ├─ executor:  submitit's executor parameters               (submitit backend)
                 └─ node.torchrun.node_plan: each node's torchrun argv and env (every backend)

`doctor` gives preflight verdicts over facts it gathers about this machine and cluster.
"""
