"""Names of the variables `ddpctl launch` exports to workers and `ddpctl.runtime` reads (the contract)."""

RUN_DIR = "DDPCTL_RUN_DIR"  # the job's run directory (absolute)
ATTEMPT = "DDPCTL_ATTEMPT"  # restart count of this run: 0, 1, ...
RESTART_COUNT = "DDPCTL_RESTART_COUNT"  # the same number, under the name scripts with their own checkpoints look for
CKPT_DIR = "DDPCTL_CKPT_DIR"  # where the Checkpointer writes
CKPT_KEEP = "DDPCTL_CKPT_KEEP"  # how many complete checkpoints to keep
STOP_FILE = "DDPCTL_STOP_FILE"  # node-local flag file created when the stop signal arrives
STOP_SIGNAL = "DDPCTL_STOP_SIGNAL"  # e.g. "USR2": workers treat it as "stop at the next agreed step"
SCRIPT_SIGNAL = "DDPCTL_SCRIPT_SIGNAL"  # requeue.script_signal: the worker sends it to the script on a stop
STOP_LEAD_S = "DDPCTL_STOP_LEAD_S"  # requeue.lead_s: how long a stop may take before it counts as unacknowledged
PG_TIMEOUT_S = "DDPCTL_PG_TIMEOUT_S"  # process-group timeout for init_process_group
PG_BACKEND = "DDPCTL_PG_BACKEND"  # runtime.init's default group backend, e.g. "cuda:gloo" (the NCCL-shaped test lane)
NODE_NAME = "DDPCTL_NODE"  # Slurm node name this rank runs on (for log prefixes)
RANK_LOG = "DDPCTL_RANK_LOG_PATTERN"  # e.g. ".../attempt-0/rank-{rank}.log": the worker wrapper fills in RANK
# Set by the batch shell for its step: when the attempt started ($EPOCHREALTIME) and on which host. Node 0's
# launcher records the attempt's start with them; `internal decide` does when no launcher did.
ATTEMPT_AT = "DDPCTL_ATTEMPT_AT"
BATCH_HOST = "DDPCTL_BATCH_HOST"
# Test/benchmark-only seam: set to "1" in a spec's env, `ddpctl launch` starts the torch-free stand-in
# (ddpctl.node.standin, N simulated ranks per node) instead of torchrun. Never set it for real training.
STANDIN = "DDPCTL_STANDIN"
