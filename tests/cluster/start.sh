#!/usr/bin/env bash
# Start (or check) the project's local Slurm test cluster (22.05, or 24.11 with DDPCTL_TEST_SLURM=24.11): munge, slurmctld and one slurmd per node, each
# node in its own network + UTS namespace (hostname nodeN, IP 10.99.0.1N on bridge ddpctl-br0; the controller is
# ddpctl-ctl at 10.99.0.1). Installs Debian's packages when missing. Idempotent: a healthy running cluster is
# left alone; a changed configuration restarts the Slurm daemons.
#   DDPCTL_TEST_NODES (default 16; partition `scale` spans them all)
#   DDPCTL_TEST_BASE_NODES (default 2: the nodes of partitions debug, lowprio and urgent; debug2, lowprio2 and
#     urgent2 get as many of the last nodes)
#   DDPCTL_TEST_CPUS (default 2, CPUs per node; at most the machine's CPUs, which ConstrainCores hands out)
#   DDPCTL_TEST_GPUS (default 2, fake GPUs per node: GRES gpu backed by character devices under /dev/ddpctl-gpu)
#   DDPCTL_TEST_MEM (default 4096, MiB per node; DefMemPerCPU is this / CPUs)
#   DDPCTL_TEST_CRED_EXPIRE (default 5; the requeue hold is this + 1 s)
#   DDPCTL_TEST_JOB_REQUEUE (default 1; 0: JobRequeue=0, jobs are not requeued unless they ask with --requeue)
#   DDPCTL_TEST_STATE_DIR (default /var/lib/ddpctl-test-cluster: pid files, logs, spool)
#   DDPCTL_TEST_SLURM (default 22.05: Debian 12's packages; 24.11: Debian 13's, in a root built once, slurm2411.sh)
#   DDPCTL_TEST_SLURM_CACHE (default /var/cache/ddpctl-test-cluster: where the 24.11 root is built)
set -euo pipefail
# shellcheck source=tests/cluster/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

NODES="${DDPCTL_TEST_NODES:-16}"
BASE_NODES="${DDPCTL_TEST_BASE_NODES:-2}"
CPUS="${DDPCTL_TEST_CPUS:-2}"
GPUS="${DDPCTL_TEST_GPUS:-2}"
MEM="${DDPCTL_TEST_MEM:-4096}"
CRED_EXPIRE="${DDPCTL_TEST_CRED_EXPIRE:-5}"
JOB_REQUEUE="${DDPCTL_TEST_JOB_REQUEUE:-1}"
READY_TIMEOUT="${DDPCTL_TEST_READY_TIMEOUT:-30}"
T0=$(date +%s.%N)

# Undo temporary changes to the system (run once, also on early exit).
CLEANUP=()
cleanup() {
    local c
    for c in "${CLEANUP[@]}"; do
        eval "$c" || true
    done
    CLEANUP=()
}

elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'; }

check_args() {
    [[ $NODES =~ ^[0-9]+$ ]] && ((NODES >= 1 && NODES <= 80)) || die "DDPCTL_TEST_NODES must be 1..80, got '$NODES'"
    [[ $BASE_NODES =~ ^[0-9]+$ ]] && ((BASE_NODES >= 1 && BASE_NODES <= NODES)) ||
        die "DDPCTL_TEST_BASE_NODES must be 1..DDPCTL_TEST_NODES ($NODES), got '$BASE_NODES'"
    local have
    have=$(nproc --all)
    [[ $CPUS =~ ^[0-9]+$ ]] && ((CPUS >= 1 && CPUS <= have)) ||
        die "DDPCTL_TEST_CPUS must be 1..$have (this machine's CPUs: ConstrainCores binds jobs to real ones), got '$CPUS'"
    [[ $GPUS =~ ^[0-9]+$ ]] && ((GPUS <= 8)) || die "DDPCTL_TEST_GPUS must be 0..8, got '$GPUS'"
    [[ $MEM =~ ^[0-9]+$ ]] && ((MEM >= 512)) || die "DDPCTL_TEST_MEM must be >= 512 (MiB), got '$MEM'"
    [[ $CRED_EXPIRE =~ ^[0-9]+$ ]] && ((CRED_EXPIRE >= 5)) || die "DDPCTL_TEST_CRED_EXPIRE must be >= 5, got '$CRED_EXPIRE'"
    [[ $JOB_REQUEUE == [01] ]] || die "DDPCTL_TEST_JOB_REQUEUE must be 0 or 1, got '$JOB_REQUEUE'"
    [[ " $SLURM_VERSIONS " == *" $SLURM_VERSION "* ]] ||
        die "DDPCTL_TEST_SLURM must be one of: $SLURM_VERSIONS; got '$SLURM_VERSION'"
}

install_packages() {
    local cmd missing=()
    # ch-run and debootstrap: the real container tests build a Debian 12 directory image and run it in the jobs,
    # under ch-run and under podman (crun: podman's --cgroups=disabled needs it; catatonit: podman's --init).
    for cmd in slurmctld slurmd sinfo munged ip nsenter unshare runuser ch-run debootstrap podman crun catatonit; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    # openssh-server: the remote-cluster tests run their own sshd on loopback (tests/remote/test_remote_sshd.py).
    [[ -x /usr/sbin/sshd ]] || missing+=(sshd)
    # chromium: the run report's browser test opens the report headless (tests/integration/test_report_local.py).
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    # openssl: the mail tests make a self-signed certificate for their TLS relay (tests/smtptools.py).
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    ((${#missing[@]} == 0)) && return 0
    command -v apt-get >/dev/null 2>&1 ||
        die "missing ${missing[*]} and no apt-get: this script installs Slurm from Debian 12's packages"
    log "installing slurmctld slurmd slurm-client munge iproute2 charliecloud debootstrap podman crun catatonit" \
        "openssh-server chromium openssl" \
        "(missing: ${missing[*]})"
    trap cleanup EXIT
    # No init system here: stop the packages' postinst from starting daemons (invoke-rc.d honours exit 101).
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        CLEANUP+=("rm -f /usr/sbin/policy-rc.d")
    fi
    # Skip man-db's index rebuild for this install (~2 s): its trigger only runs while this file exists.
    if [[ -e /var/lib/man-db/auto-update ]]; then
        mv /var/lib/man-db/auto-update /var/lib/man-db/auto-update.ddpctl
        CLEANUP+=("mv /var/lib/man-db/auto-update.ddpctl /var/lib/man-db/auto-update")
    fi
    local rc=0 apt_log="${TMPDIR:-/tmp}/ddpctl-cluster-apt.log"
    {
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                -o Dpkg::Options::=--force-unsafe-io slurmctld slurmd slurm-client munge iproute2 charliecloud debootstrap \
                podman crun catatonit openssh-server chromium openssl
    } >"$apt_log" 2>&1 || rc=$?
    cleanup
    if ((rc != 0)); then
        tail -n 30 "$apt_log" >&2
        die "apt-get failed (exit $rc); full log: $apt_log"
    fi
    log "packages installed ($(elapsed) s)"
}

ensure_munge() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        install -d -o munge -g munge -m 0700 /etc/munge
        head -c 1024 /dev/urandom >/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 0400 /etc/munge/munge.key
    fi
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock "$MUNGE_PIDFILE"
    # munged refuses to run as root.
    run_daemon runuser -u munge -- /usr/sbin/munged --force
    touch "$MUNGE_OURS"
    local i
    for ((i = 0; i < 50; i++)); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && { log "munged started"; return 0; }
        sleep 0.1
    done
    tail -n 20 /var/log/munge/munged.log >&2 || true
    die "munged did not start"
}

render_config() {
    local i nodes="" base="" pair=""
    for ((i = 1; i <= BASE_NODES; i++)); do
        base+="${base:+,}$(node_name "$i")"
    done
    # The second pair: the last BASE_NODES nodes, where the tests marked second_pair run beside the others.
    for ((i = NODES - BASE_NODES + 1; i <= NODES; i++)); do
        pair+="${pair:+,}$(node_name "$i")"
    done
    for ((i = 1; i <= NODES; i++)); do
        nodes+="NodeName=$(node_name "$i") NodeAddr=$(node_addr "$i") NodeHostname=$(node_name "$i") CPUs=$CPUS"
        nodes+=" Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM"
        ((GPUS > 0)) && nodes+=" Gres=gpu:$GPUS"
        # Slurm fills the lowest Weight first: a `scale` job takes the second pair only when it needs it.
        ((i > NODES - BASE_NODES && i > BASE_NODES)) && nodes+=" Weight=2"
        nodes+=" State=UNKNOWN"$'\n'
    done
    echo "$CONF_MARKER; regenerated on every start, local edits are lost."
    sed -e "s|@CTL_HOST@|$CTL_HOST|g" -e "s|@CTL_ADDR@|$CTL_ADDR|g" -e "s|@CRED_EXPIRE@|$CRED_EXPIRE|g" \
        -e "s|@JOB_REQUEUE@|$JOB_REQUEUE|g" -e "s|@STATE_DIR@|$STATE_DIR|g" -e "s|@BASE_NODES@|$base|g" -e "s|@PAIR_NODES@|$pair|g" \
        -e "s|@DEF_MEM_PER_CPU@|$((MEM / CPUS))|g" \
        "$CLUSTER_DIR/slurm.conf.in" |
        awk -v nodes="${nodes%$'\n'}" '$0 == "@NODES@" {print nodes; next} {print}'
    version_config
}

# Lines only one version needs (appended to the shared slurm.conf.in).
version_config() {
    [[ $SLURM_VERSION == 24.11 ]] || return 0
    echo "# Slurm 24.11 (Debian 13 root): plugins from the root's /usr/lib/x86_64-linux-gnu/slurm-wlm."
}

# Switching versions stops the other version's daemons (its jobs are lost) before this one starts.
switch_version() {
    local active
    active=$(active_version)
    if [[ $active != "$SLURM_VERSION" ]]; then
        use_version "$active"
        if pidfile_alive "$RUN_DIR/slurmctld.pid" slurmctld || compgen -G "$RUN_DIR/slurmd-*.pid" >/dev/null; then
            log "switching from Slurm $active to $SLURM_VERSION: stopping the $active daemons"
            stop_slurm
        fi
    fi
    [[ $SLURM_VERSION == 24.11 ]] || { stop_munge_2411; stop_client_ns_2411; }
    use_version "$SLURM_VERSION"
    if [[ $SLURM_VERSION == 24.11 ]]; then
        ensure_root_2411
        write_wrappers_2411
        ensure_client_ns_2411
        ensure_munge_2411
    else
        ensure_munge
    fi
    printf 'version=%s\npath=%s\n' "$SLURM_VERSION" "$([[ $SLURM_VERSION == 24.11 ]] && echo "$BIN_2411")" \
        >"$ACTIVE_FILE"
}

# Writes slurm.conf/cgroup.conf; when the config changed under running daemons, stops them first.
install_config() {
    local new
    new=$(mktemp)
    render_config >"$new"
    if [[ -f $SLURM_CONF ]] && cmp -s "$new" "$SLURM_CONF"; then
        rm -f "$new"
        return 0
    fi
    if [[ -f $SLURM_CONF ]] && ! grep -q "^$CONF_MARKER" "$SLURM_CONF" && [[ ! -e $STATE_DIR/slurm.conf.orig ]]; then
        log "keeping the existing $SLURM_CONF as $STATE_DIR/slurm.conf.orig (stop.sh puts it back)"
        cp -p "$SLURM_CONF" "$STATE_DIR/slurm.conf.orig"
    fi
    # A change in comments only is written without restarting the daemons (and their jobs).
    if ! cmp -s <(grep -v '^#' "$new") <(grep -sv '^#' "$SLURM_CONF") &&
        { pidfile_alive "$RUN_DIR/slurmctld.pid" slurmctld || compgen -G "$RUN_DIR/slurmd-*.pid" >/dev/null; }; then
        log "configuration changed: restarting the Slurm daemons"
        stop_slurm
    fi
    install -d -m 0755 "$SLURM_ETC"
    install -m 0644 "$new" "$SLURM_CONF"
    rm -f "$new"
    { echo "$CONF_MARKER"; cat "$CLUSTER_DIR/cgroup.conf"; } >"$CGROUP_CONF"
    {
        echo "$CONF_MARKER"
        # AutoDetect=off: there is no NVML; Slurm takes the devices as listed (index = position).
        echo "AutoDetect=off"
        ((GPUS > 0)) && echo "Name=gpu File=$GPU_DEV_DIR/nvidia[0-$((GPUS - 1))]"
    } >"$GRES_CONF"
}

# Fake GPUs: character devices with NVIDIA's major number. Slurm schedules them as GRES, sets
# CUDA_VISIBLE_DEVICES/SLURM_STEP_GPUS and denies the ones a step was not given in its devices cgroup; opening
# one that is allowed fails with ENXIO (no driver), one that is denied with EPERM.
ensure_fake_gpus() {
    local i
    install -d -m 0755 "$GPU_DEV_DIR"
    for ((i = 0; i < GPUS; i++)); do
        [[ -c $GPU_DEV_DIR/nvidia$i ]] || mknod -m 0666 "$GPU_DEV_DIR/nvidia$i" c 195 "$i"
    done
}

# Each node's cgroups: a directory per controller under $CG_PARENT/nodeN. slurmd is started inside them, in
# its own cgroup namespace, with the controllers mounted again in its own mount namespace, so every slurmd
# sees its directory as the root of the hierarchy and builds its usual slurm/uid_*/job_* tree there
# (Debian's Slurm is not built with --enable-multiple-slurmd; without this, two slurmd on one machine
# would share one job_<id> directory).
ensure_node_cgroups() {
    local i c dir
    for c in $CG_CONTROLLERS; do
        dir=/sys/fs/cgroup/$c/$CG_PARENT
        [[ -d /sys/fs/cgroup/$c ]] || die "no cgroup v1 $c controller at /sys/fs/cgroup/$c"
        install -d "$dir"
        if [[ $c == cpuset ]]; then
            cat /sys/fs/cgroup/cpuset/cpuset.cpus >"$dir/cpuset.cpus"
            cat /sys/fs/cgroup/cpuset/cpuset.mems >"$dir/cpuset.mems"
        fi
        for ((i = 1; i <= NODES; i++)); do
            install -d "$dir/$(node_name "$i")"
            if [[ $c == cpuset ]]; then
                cat "$dir/cpuset.cpus" >"$dir/$(node_name "$i")/cpuset.cpus"
                cat "$dir/cpuset.mems" >"$dir/$(node_name "$i")/cpuset.mems"
            fi
        done
    done
}

ensure_network() {
    local i ns veth hosts="$CTL_ADDR $CTL_HOST"
    ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
    ip -4 addr show dev "$BRIDGE" | grep -q "inet $CTL_ADDR/" || ip addr add "$CTL_ADDR/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    for ((i = 1; i <= NODES; i++)); do
        ns=$(node_ns "$i")
        veth="${NS_PREFIX}v$i"
        [[ -e /run/netns/$ns ]] || ip netns add "$ns"
        if ! ip -n "$ns" link show eth0 >/dev/null 2>&1; then
            ip link del "$veth" 2>/dev/null || true
            ip link add "$veth" type veth peer name eth0 netns "$ns"
        fi
        ip link set "$veth" master "$BRIDGE" up
        ip -n "$ns" link set lo up
        ip -n "$ns" -4 addr show dev eth0 | grep -q "inet $(node_addr "$i")/" ||
            ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        # Nothing outside 10.99.0.0/24 is reachable from a node, so make leaving it fail at once: with a
        # default route via the bridge, DNS queries to the host's resolver hang for its full timeout (2 x 5 s),
        # and torch's c10d store does a reverse lookup of every peer that connects (IPv6-mapped addresses are
        # not in /etc/hosts) — 10 s per peer at every rendezvous.
        ip -n "$ns" route replace unreachable default
        hosts+=$'\n'"$(node_addr "$i") $(node_name "$i")"
    done
    # Namespaces of nodes beyond NODES (a previous, larger cluster).
    for ns in $(ip netns list | awk '{print $1}'); do
        [[ $ns == "${NS_PREFIX}node"* ]] || continue
        i=${ns#"${NS_PREFIX}node"}
        [[ $i =~ ^[0-9]+$ ]] && ((i > NODES)) && ip netns del "$ns"
    done
    write_hosts_block "$hosts"
}

# The job cgroups a node's slurmd left behind (a node killed or cut off mid-job; tests/cluster/README.md): removed
# depth-first where no process is left in them. A fresh controller numbers jobs from 1 again, and a new job_<id>
# meeting an old one's directory fails its step ("Slurmd could not execve job": its cpuset.cpus write is EBUSY
# under the old step directory). Only where no slurmd runs that could be making a job's directory right now:
# before a node's slurmd starts, and on every node when a fresh controller starts (no job exists yet).
clear_job_cgroups() {
    local c
    for c in $CG_CONTROLLERS; do
        [[ -d /sys/fs/cgroup/$c/$CG_PARENT/$1 ]] || continue
        # -depth: a job's step and task directories come before it.
        find "/sys/fs/cgroup/$c/$CG_PARENT/$1" -depth -type d -path '*/job_*' 2>/dev/null |
            while read -r dir; do rmdir "$dir" 2>/dev/null || true; done
    done
}

start_daemons() {
    local i name
    if ! pidfile_alive "$RUN_DIR/slurmctld.pid" slurmctld; then
        for ((i = 1; i <= NODES; i++)); do
            clear_job_cgroups "$(node_name "$i")"
        done
        # A fresh controller starts with no jobs: tests must not see jobs from a previous cluster.
        rm -rf "$STATE_DIR/ctld"
        [[ -f $LOG_DIR/jobcomp.txt ]] && mv -f "$LOG_DIR/jobcomp.txt" "$LOG_DIR/jobcomp.txt.old"
        install -d -m 0755 "$STATE_DIR/ctld"
        # slurmctld insists that SlurmctldHost is this host's short name: give it its own UTS namespace.
        run_daemon unshare --uts -- sh -c "echo $CTL_HOST >/proc/sys/kernel/hostname && exec ${SLURM_RUN:+$SLURM_RUN }slurmctld -i"
        log "slurmctld started"
    fi
    for ((i = 1; i <= NODES; i++)); do
        name=$(node_name "$i")
        pidfile_alive "$RUN_DIR/slurmd-$name.pid" slurmd && continue
        clear_job_cgroups "$name"
        install -d -m 0755 "$STATE_DIR/spool/$name"
        # nsenter, not `ip netns exec`: the latter remounts /sys. The outer shell joins the node's cgroups
        # (the new cgroup namespace is rooted where its creator is); the inner one mounts the controllers
        # afresh on a private tmpfs, which then show that root. On 24.11 ($SLURM_RUN) slurmd then enters its root
        # with /sys bound after those mounts, so it and its jobs see the node's cgroups.
        run_daemon sh -c 'for c in $2; do echo $$ >"/sys/fs/cgroup/$c/$3/$1/cgroup.procs" || exit 1; done
            exec nsenter --net="$4" unshare --uts --cgroup --mount --propagation private -- sh -c "
                echo $1 >/proc/sys/kernel/hostname || exit 1
                mount -t tmpfs -o mode=755 ddpctl-cgroup /sys/fs/cgroup || exit 1
                for c in $2; do
                    mkdir /sys/fs/cgroup/\$c && mount -t cgroup -o \$c ddpctl-\$c /sys/fs/cgroup/\$c || exit 1
                done
                exec $5 slurmd -N $1"' sh "$name" "$CG_CONTROLLERS" "$CG_PARENT" "/run/netns/$(node_ns "$i")" "$SLURM_RUN"
        log "slurmd $name started"
    done
}

dump_logs() {
    local f
    for f in "$LOG_DIR"/slurmctld.log "$LOG_DIR"/slurmd-*.log; do
        [[ -f $f ]] || continue
        echo "----- tail $f" >&2
        tail -n 25 "$f" >&2
    done
}

# Ready: every node answers and can run jobs (idle; or busy with jobs when the cluster was already up).
wait_ready() {
    local deadline states bad resumed=0 n
    deadline=$(awk -v t="$(date +%s.%N)" -v d="$READY_TIMEOUT" 'BEGIN {printf "%d", t + d}')
    while :; do
        states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u || true)
        [[ -n ${DDPCTL_TEST_DEBUG:-} ]] && log "$(date +%T.%N) states: $(echo $states)"
        n=$(printf '%s\n' "$states" | grep -c . || true)
        bad=$(printf '%s\n' "$states" | grep -Ev ' (idle|allocated|mixed|completing)$' | grep . || true)
        if [[ -n $states && $n -eq $NODES && -z $bad ]]; then
            return 0
        fi
        # A node drained/down by an earlier run (its slurmd is alive, we just checked) is put back once.
        if ((!resumed)) && grep -Eq ' (drained|draining|down)$' <<<"$bad"; then
            scontrol update nodename="$(awk '{print $1}' <<<"$bad" | paste -sd,)" state=resume 2>/dev/null || true
            resumed=1
        fi
        if (($(date +%s) >= deadline)); then
            echo "node states: ${states:-<sinfo gave nothing>}" >&2
            dump_logs
            die "cluster not ready after $READY_TIMEOUT s"
        fi
        sleep 0.1
    done
}

main() {
    require_root
    check_args
    # --build-root: only build the Slurm 24.11 root (once; complete or absent), without the cluster's lock, so CI
    # builds it in the background while the 22.05 tests run (needs debootstrap, which a first start installs).
    if [[ ${1:-} == --build-root ]]; then
        [[ $SLURM_VERSION == 24.11 ]] || die "--build-root builds the Slurm 24.11 root: set DDPCTL_TEST_SLURM=24.11"
        ensure_root_2411
        return 0
    fi
    take_lock
    install_packages
    # --packages: only the packages (the sshd tests need openssh-server, not a running cluster).
    [[ ${1:-} == --packages ]] && return 0
    install -d -m 0755 "$STATE_DIR" "$RUN_DIR" "$LOG_DIR" "$STATE_DIR/spool"
    switch_version
    install_config
    ensure_fake_gpus
    ensure_node_cgroups
    ensure_network
    start_daemons
    wait_ready
    log "ready: Slurm $SLURM_VERSION, $NODES nodes ($(sinfo -h -N -o '%N' | sort -u | paste -sd' ')), partitions debug (default)," \
        "lowprio and urgent on the first $BASE_NODES, debug2, lowprio2 and urgent2 on the last $BASE_NODES, scale on all;" \
        "took $(elapsed) s"
}

main "$@"
