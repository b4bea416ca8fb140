#!/usr/bin/env bash
# Stop the local Slurm test cluster started by start.sh: cancels its jobs, stops exactly the daemons whose pid
# files start.sh's cluster wrote (munged only if start.sh started it), removes the node namespaces, the bridge
# and the /etc/hosts block. Leaves installed packages, /etc/slurm and the logs under the state dir.
set -euo pipefail
# shellcheck source=tests/cluster/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

require_root
take_lock
stop_slurm
if [[ -e $MUNGE_OURS ]]; then
    stop_pidfile "$MUNGE_PIDFILE" munged
    rm -f "$MUNGE_OURS"
fi
remove_network
remove_node_cgroups
write_hosts_block ""
if [[ -e $STATE_DIR/slurm.conf.orig ]]; then
    cp -p "$STATE_DIR/slurm.conf.orig" "$SLURM_CONF"
    rm -f "$STATE_DIR/slurm.conf.orig"
    log "restored the previous $SLURM_CONF"
fi
log "stopped"
