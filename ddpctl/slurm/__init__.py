"""What ddpctl knows about Slurm, with no job spec in sight.

`env` derives the distributed environment (MASTER_ADDR, ports, ranks: `DistEnv`) from a step's SLURM_*
variables, `hostlist` expands Slurm's compact host lists (as `scontrol show hostnames` does), and `commands` is
the one place sbatch/squeue/scontrol/scancel command lines are spelled, run through an injectable
`ddpctl.proc.Runner`; `scontrol` is the one parser of scontrol's KEY=value output, and `cluster` gathers the
cluster's facts once (`ClusterFacts`: version, plugins, JobRequeue, partitions, GRES) for plan/ to decide from.

    SLURM_* ──env──▶ DistEnv ──▶ node/ (torchrun argv)        backends/ ──commands──▶ sbatch, squeue, ...
    scontrol show config/partition/node ──cluster──▶ ClusterFacts ──▶ plan/ (preflight, requeue mode, doctor)
"""
