"""What ddpctl knows about Slurm, with no job spec in sight.

`env` derives the distributed environment (MASTER_ADDR, ports, ranks: `DistEnv`) from a step's SLURM_*
variables, `hostlist` expands Slurm's compact host lists (as `scontrol show hostnames` does), and `commands` is
the one place sbatch/squeue/scontrol/scancel/sinfo command lines are spelled, run through an injectable
`ddpctl.proc.Runner`, with pure parsers of their output.

    SLURM_* ──env──▶ DistEnv ──▶ node/ (torchrun argv)        backends/ ──commands──▶ sbatch, squeue, ...
"""
