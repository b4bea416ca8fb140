#!/usr/bin/env bash
# Stop the local Slurm test cluster started by start.sh, whichever Slurm version runs: cancels its jobs, stops
# exactly the daemons whose pid files start.sh's cluster wrote (munged only if start.sh started it), removes the
# node namespaces, the bridge and the /etc/hosts block. Leaves installed packages, /etc/slurm and the logs.
set -euo pipefail
# shellcheck source=tests/cluster/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

require_root
take_lock
ACTIVE=$(active_version)
use_version "$ACTIVE"
stop_slurm
stop_munge_2411  # the 24.11 root's munged, if it runs
stop_client_ns_2411  # and the holder of its clients' mount namespace
rm -f "$ACTIVE_FILE"
if [[ -e $MUNGE_OURS ]]; then
    stop_pidfile "$MUNGE_PIDFILE" munged
    rm -f "$MUNGE_OURS"
fi
remove_network
remove_node_cgroups
write_hosts_block ""
if [[ -e $STATE_DIR/slurm.conf.orig ]]; then
    cp -p "$STATE_DIR/slurm.conf.orig" /etc/slurm/slurm.conf
    rm -f "$STATE_DIR/slurm.conf.orig"
    log "restored the previous /etc/slurm/slurm.conf"
fi
log "stopped"
