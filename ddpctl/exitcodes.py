"""The one table of exit statuses ddpctl uses, CLI and node side alike."""

OK = 0
FAILURE = 1
USAGE = 2  # bad user input: spec, flag, unknown job
# Stopping for requeue is signalled by the stopped marker file (see layout.py), not by an exit status: every
# rank and every node exits 0 then, so neither torchrun nor `srun --kill-on-bad-exit` treats it as a crash.
# Exit status of the batch script when a requeue budget is spent: distinct so `status` can name the reason.
BUDGET_SPENT = 76
