# shellcheck shell=bash
# Shared settings and helpers for start.sh / stop.sh (sourced, not executed).
# Everything the test cluster owns is named here: state dir, bridge, namespaces, hosts block, config files.

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE_DIR="${DDPCTL_TEST_STATE_DIR:-/var/lib/ddpctl-test-cluster}"
RUN_DIR="$STATE_DIR/run"
LOG_DIR="$STATE_DIR/log"
SLURM_ETC=/etc/slurm
SLURM_CONF="$SLURM_ETC/slurm.conf"
CGROUP_CONF="$SLURM_ETC/cgroup.conf"
GRES_CONF="$SLURM_ETC/gres.conf"
GPU_DEV_DIR=/dev/ddpctl-gpu
# cgroup v1 controllers each node gets a directory of (under $CG_PARENT/nodeN); Slurm's cgroup/v1 plugin uses
# cpuset (ConstrainCores), memory (ConstrainRAMSpace), devices (ConstrainDevices), freezer (proctrack/cgroup).
CG_CONTROLLERS="cpuset memory devices freezer cpuacct"
CG_PARENT=ddpctl-test-cluster
CONF_MARKER="# Managed by ddpctl tests/cluster/start.sh"
HOSTS_BEGIN="# BEGIN ddpctl-test-cluster (managed by tests/cluster/start.sh)"
HOSTS_END="# END ddpctl-test-cluster"
BRIDGE=ddpctl-br0
NET_PREFIX=10.99.0
CTL_ADDR="$NET_PREFIX.1"
CTL_HOST=ddpctl-ctl
NS_PREFIX=ddpctl-
MUNGE_PIDFILE=/run/munge/munged.pid
MUNGE_OURS="$RUN_DIR/munged.ours"
# The Slurm version start.sh starts (DDPCTL_TEST_SLURM) and the one whose daemons run now (ACTIVE_FILE, written by
# start.sh, removed by stop.sh; tests/conftest.py reads it): 22.05 is the host's Debian 12 packages, 24.11 runs
# from a Debian 13 root (slurm2411.sh).
SLURM_VERSIONS="22.05 24.11"
SLURM_VERSION="${DDPCTL_TEST_SLURM:-22.05}"
ACTIVE_FILE="$STATE_DIR/slurm-active"
# What runs a Slurm daemon or command of the version in use ("" for the host's; set by use_version).
SLURM_RUN=""
# shellcheck source=tests/cluster/slurm2411.sh
source "$CLUSTER_DIR/slurm2411.sh"

log() { printf '[test-cluster] %s\n' "$*" >&2; }
die() { printf '[test-cluster] ERROR: %s\n' "$*" >&2; exit 1; }

require_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages, creates network namespaces and starts Slurm daemons)"
}

# Serialise start.sh/stop.sh runs (several test sessions may call start.sh at the same time).
take_lock() {
    install -d -m 0755 "$STATE_DIR"
    exec 9>"$STATE_DIR/lock"
    flock -w 900 9 || die "another start.sh/stop.sh holds $STATE_DIR/lock"
}

# The version whose daemons run now: a running slurmctld tells by its root directory (a start.sh that knows no
# versions may have replaced the daemons since ACTIVE_FILE was written); else what ACTIVE_FILE says; else 22.05.
active_version() {
    local v pid
    pid=$(tr -dc 0-9 <"$RUN_DIR/slurmctld.pid" 2>/dev/null || true)
    if pid_alive "$pid" slurmctld; then
        [[ $(readlink "/proc/$pid/root") == "$V2411_ROOT" ]] && echo 24.11 || echo 22.05
        return 0
    fi
    v=$(sed -n 's/^version=//p' "$ACTIVE_FILE" 2>/dev/null || true)
    echo "${v:-22.05}"
}

# use_version V: config paths, clients on PATH and the daemon prefix of Slurm V.
use_version() {
    case $1 in
    22.05)
        SLURM_ETC=/etc/slurm
        SLURM_RUN=""
        PATH=$(tr : '\n' <<<"$PATH" | grep -vxF "$BIN_2411" | paste -sd:)
        ;;
    24.11)
        SLURM_ETC="$V2411_ROOT/etc/slurm"
        SLURM_RUN="$V2411_ENTER"
        case :$PATH: in *:"$BIN_2411":*) ;; *) PATH="$BIN_2411:$PATH" ;; esac
        ;;
    *) die "DDPCTL_TEST_SLURM must be one of: $SLURM_VERSIONS; got '$1'" ;;
    esac
    SLURM_CONF="$SLURM_ETC/slurm.conf"
    CGROUP_CONF="$SLURM_ETC/cgroup.conf"
    GRES_CONF="$SLURM_ETC/gres.conf"
}

# run_daemon CMD...: run CMD (a daemon that forks or a shell that execs one) with every inherited descriptor
# above 2 closed. A daemon must not keep a lock its starter held: `flock LOCK start.sh` would otherwise stay
# locked for the daemon's lifetime.
run_daemon() {
    (
        local fd
        for fd in /proc/"$BASHPID"/fd/*; do
            fd=${fd##*/}
            ((fd > 2)) && eval "exec $fd>&-"
        done
        exec "$@"
    )
}

node_name() { printf 'node%d' "$1"; }
node_addr() { printf '%s.%d' "$NET_PREFIX" $((10 + $1)); }
node_ns() { printf '%s%s' "$NS_PREFIX" "$(node_name "$1")"; }

# True when PID runs and is not a zombie (exited daemons can linger as zombies in some sandboxes, so
# `kill -0` is not enough) and, given NAME, its comm starts with NAME (guards against pid reuse).
pid_alive() {
    local pid=$1 name=${2:-} stat comm
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z && ${stat:0:1} != X ]] || return 1
    if [[ -n $name ]]; then
        comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
        [[ $comm == "$name"* ]] || return 1
    fi
}

# pidfile_alive FILE NAME: the daemon recorded in FILE is running.
pidfile_alive() {
    local pid
    [[ -r $1 ]] || return 1
    pid=$(tr -dc 0-9 <"$1")
    pid_alive "$pid" "$2"
}

# stop_pidfile FILE NAME: TERM the daemon recorded in FILE, wait, KILL if needed, verify, remove FILE.
stop_pidfile() {
    local file=$1 name=$2 pid i
    if ! pidfile_alive "$file" "$name"; then
        rm -f "$file"
        return 0
    fi
    pid=$(tr -dc 0-9 <"$file")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pid" "$name" || break
        sleep 0.1
    done
    if pid_alive "$pid" "$name"; then
        log "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do
            pid_alive "$pid" "$name" || break
            sleep 0.1
        done
    fi
    pid_alive "$pid" "$name" && die "could not stop $name (pid $pid)"
    rm -f "$file"
    log "stopped $name (pid $pid)"
}

# The node count of the cluster described by the current slurm.conf (0 when there is none of ours).
configured_nodes() {
    [[ -r $SLURM_CONF ]] && grep -q "^$CONF_MARKER" "$SLURM_CONF" || { echo 0; return; }
    grep -c "^NodeName=" "$SLURM_CONF" || true
}

# Cancel every job (stepds would otherwise outlive their slurmd) and stop all slurmd + slurmctld we started.
stop_slurm() {
    local ids f
    if [[ -f $RUN_DIR/slurmctld.pid ]] && pidfile_alive "$RUN_DIR/slurmctld.pid" slurmctld; then
        ids=$(squeue -h -o %i 2>/dev/null || true)
        if [[ -n $ids ]]; then
            log "cancelling jobs: $(echo "$ids" | tr '\n' ' ')"
            # shellcheck disable=SC2086
            scancel $ids 2>/dev/null || true
            for ((i = 0; i < 150; i++)); do
                [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
                sleep 0.1
            done
        fi
    fi
    for f in "$RUN_DIR"/slurmd-*.pid; do
        [[ -e $f ]] && stop_pidfile "$f" slurmd
    done
    stop_pidfile "$RUN_DIR/slurmctld.pid" slurmctld
}

# Remove the node namespaces, veths and bridge (only ours: every name carries our prefix).
remove_network() {
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        [[ $ns == "$NS_PREFIX"* ]] || continue
        ip netns del "$ns"
        log "removed network namespace $ns"
    done
    for ns in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
        [[ $ns == "$NS_PREFIX"v* ]] && ip link del "$ns" 2>/dev/null || true
    done
    if ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link del "$BRIDGE"
        log "removed bridge $BRIDGE"
    fi
}

# write_hosts_block [LINES]: replace (or with no lines, remove) our block in /etc/hosts, in place
# (/etc/hosts is often a bind mount, so it is rewritten, never replaced by rename).
write_hosts_block() {
    local lines=${1:-} tmp
    tmp=$(mktemp)
    awk -v b="$HOSTS_BEGIN" -v e="$HOSTS_END" '$0 == b {skip = 1; next} $0 == e {skip = 0; next} !skip' \
        /etc/hosts >"$tmp"
    if [[ -n $lines ]]; then
        printf '%s\n%s\n%s\n' "$HOSTS_BEGIN" "$lines" "$HOSTS_END" >>"$tmp"
    fi
    cmp -s "$tmp" /etc/hosts || cat "$tmp" >/etc/hosts
    rm -f "$tmp"
}

# Remove the per-node cgroup directories (deepest first; a directory still holding processes stays, and
# says so).
remove_node_cgroups() {
    local c dir
    for c in $CG_CONTROLLERS; do
        dir=/sys/fs/cgroup/$c/$CG_PARENT
        [[ -d $dir ]] || continue
        find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || log "some of $dir is still in use; left in place"
    done
}
