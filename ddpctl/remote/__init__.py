"""Remote clusters reached over SSH: `profiles` reads and checks clusters.yaml (pure), `ssh` builds the OpenSSH
command line and reads its failures (pure), `transport` is the one edge that runs it, `check` asks a cluster
for its ddpctl and Slurm versions through the transport, `passthrough` shows a remote ddpctl's answer here."""
