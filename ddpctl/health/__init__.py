"""Health of a running job, from the progress records ranks leave in the shared run dir (runtime.Heartbeat).

records (reading them, bounded, no symlinks), rates (status figures and scale's steady-state throughput),
hang and straggler (pure verdicts), stacks (faulthandler dumps -> where each rank stopped), watchdog (the
per-node thread in `ddpctl launch` that acts on the verdicts). Imports only ddpctl.run and ddpctl.spec.
"""

import signal

# Sent by a node's watchdog to its workers, which ddpctl.node.worker armed with faulthandler.register: every
# thread's Python stack goes to the rank log. A real-time signal: nothing else here uses one, and the stop path
# uses requeue.signal (USR1, USR2, URG or ALRM).
DUMP_SIGNAL: int = signal.SIGRTMIN + 5
