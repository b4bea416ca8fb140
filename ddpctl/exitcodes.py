"""The one table of exit statuses ddpctl uses, CLI and node side alike."""

OK = 0
FAILURE = 1
USAGE = 2  # bad user input: spec, flag, unknown job
# `ddpctl launch` exits with this when training stopped on the warning/preemption signal after writing its
# checkpoint: the batch shell then asks `ddpctl _decide` whether to requeue. 75 is EX_TEMPFAIL ("try again").
REQUEUE = 75
# Exit status of the batch script when a requeue budget is spent: distinct so `status` can name the reason.
BUDGET_SPENT = 76
