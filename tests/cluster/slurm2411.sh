# shellcheck shell=bash
# Slurm 24.11 for the test cluster (DDPCTL_TEST_SLURM=24.11), sourced by common.sh. Debian 12 ships 22.05, so
# 24.11 comes from Debian 13 (trixie): a `debootstrap --variant=minbase trixie` root, built once into a cache
# dir, holds munged, slurmctld, slurmd, slurmstepd and the client commands. Every one of them runs chrooted into
# that root, in a private mount namespace where the host's paths the jobs and tests use (the checkout, $HOME,
# the Python install, /tmp, the state dir, /proc, /sys with the node's cgroup mounts, /dev, /etc/hosts) are
# bind-mounted at the same paths. The jobs therefore run the host's Python (built against Debian 12's glibc,
# which runs on trixie's newer one) and see the same files as on 22.05.
# On the host, $BIN_2411/{sbatch,squeue,...} run the root's clients (a 22.05 client cannot talk to a 24.11
# controller); tests/conftest.py puts that dir first on PATH while 24.11 is the active version.

V2411=24.11
V2411_CACHE="${DDPCTL_TEST_SLURM_CACHE:-/var/cache/ddpctl-test-cluster}"
# libffi8: the host Python's _ctypes (torch imports ctypes); charliecloud-runtime: ch-run for the container test.
V2411_PACKAGES="slurmctld slurmd slurm-client munge libffi8 charliecloud-runtime"
# Bump when the build steps change: a new stamp builds a new root (old ones are removed).
V2411_STAMP="trixie-1-$(printf '%s' "$V2411_PACKAGES" | sha256sum | cut -c1-8)"
V2411_ROOT="$V2411_CACHE/$V2411_STAMP"
V2411_DIR="$STATE_DIR/slurm-$V2411"
V2411_ENTER="$V2411_DIR/enter"
V2411_CLIENT_NS="$V2411_DIR/client-ns.pid"  # the holder of the host clients' mount namespace
BIN_2411="$STATE_DIR/bin-$V2411"
# Present only inside the root: a wrapper called from a job (already inside) runs the command directly.
V2411_MARKER=/etc/ddpctl-slurm-root

# The mirror apt uses here (deb822 `URIs:` or a one-line `deb` source), else deb.debian.org.
debian_mirror() {
    local m
    m=$(grep -hsoE '^URIs:[[:space:]]*[^[:space:]]+/debian[[:space:]]*$' /etc/apt/sources.list.d/* /etc/apt/sources.list |
        head -n 1 | awk '{print $2}')
    [[ -n $m ]] || m=$(grep -hsoE '^deb[[:space:]]+[^[:space:]]+/debian[[:space:]]' /etc/apt/sources.list.d/* \
        /etc/apt/sources.list | head -n 1 | awk '{print $2}')
    echo "${m:-http://deb.debian.org/debian}"
}

# Builds the trixie root once (complete or absent: it is built under a temporary name and renamed).
ensure_root_2411() {
    [[ -e $V2411_ROOT/.ddpctl-complete ]] && return 0
    command -v debootstrap >/dev/null 2>&1 || die "Slurm $V2411 needs debootstrap (apt-get install debootstrap)"
    local t0 part old build_log
    t0=$(date +%s.%N)
    install -d -m 0755 "$V2411_CACHE"
    part="$V2411_ROOT.partial-$$"
    build_log="$V2411_CACHE/build.log"
    # Earlier roots and interrupted builds. --one-file-system: never follow a mount that a killed
    # debootstrap may have left inside (its /proc).
    for old in "$V2411_CACHE"/trixie-*; do
        [[ -e $old && $old != "$V2411_ROOT" ]] || continue
        umount -R "$old/proc" "$old/sys" 2>/dev/null || true
        rm -rf --one-file-system "$old"
    done
    log "building the Slurm $V2411 root (debootstrap trixie from $(debian_mirror)) in $V2411_ROOT"
    {
        debootstrap --variant=minbase trixie "$part" "$(debian_mirror)" &&
            printf '#!/bin/sh\nexit 101\n' >"$part/usr/sbin/policy-rc.d" && chmod 755 "$part/usr/sbin/policy-rc.d" &&
            unshare --mount --propagation private -- sh -c 'mount -t proc proc "$1/proc" && shift &&
                exec chroot "$0" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                    -o Dpkg::Options::=--force-unsafe-io "$@"' "$part" "$part" $V2411_PACKAGES &&
            chroot "$part" apt-get clean
    } >"$build_log" 2>&1 || {
        tail -n 30 "$build_log" >&2
        die "building the Slurm $V2411 root failed; full log: $build_log"
    }
    touch "$part/etc/hosts" "$part$V2411_MARKER"
    # The root's own munge key (its munged serves only the root's daemons and clients).
    head -c 1024 /dev/urandom >"$part/etc/munge/munge.key"
    chroot "$part" sh -c 'chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key'
    touch "$part/.ddpctl-complete"
    mv "$part" "$V2411_ROOT"
    log "Slurm $V2411 root built ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s)"
}

# The host paths bound into the root at the same path: every top-level directory the root does not provide
# itself (the checkout, $HOME, /tmp, /proc, /sys, /dev, ...), /var/tmp, the state dir, the Python install
# when it lives under /usr/local (a Python in /usr itself would need the root's /usr: refused).
root_binds_2411() {
    local d prefix
    for d in /*; do
        [[ -d $d && ! -L $d ]] || continue
        case ${d#/} in bin | boot | etc | lib | lib32 | lib64 | libx32 | sbin | usr | var | run | lost+found) continue ;; esac
        echo "$d"
    done
    echo /var/tmp
    case $STATE_DIR in /var/* | /usr/* | /etc/* | /run/*) echo "$STATE_DIR" ;; esac
    prefix=$(python3 -c 'import sys; print(sys.base_prefix)' 2>/dev/null || true)
    case $prefix in
    /usr/local/*) echo "$prefix" ;;
    /usr/local) echo /usr/local ;;
    /usr | /usr/*) die "the Python at $prefix is the system's: Slurm $V2411's root (Debian 13) has its own /usr, \
so the jobs would not find it; use a Python outside /usr (e.g. pyenv, a venv's base under /opt or /usr/local)" ;;
    esac
    echo /etc/hosts
}

# Writes the enter script (run a command inside the root, from the same cwd, same env, same stdin; the pid stays
# the same through every exec, so signals reach the command) and the client wrappers in $BIN_2411.
write_wrappers_2411() {
    local b binds=() cmd
    mapfile -t binds < <(root_binds_2411)
    for b in "${binds[@]}"; do
        if [[ -d $b ]]; then install -d "$V2411_ROOT$b"; else [[ -e $V2411_ROOT$b ]] || touch "$V2411_ROOT$b"; fi
    done
    install -d -m 0755 "$V2411_DIR" "$BIN_2411"
    {
        echo '#!/bin/bash'
        echo "# Generated by tests/cluster/start.sh: COMMAND ARGS... run inside the Slurm $V2411 root."
        printf 'ROOT=%q\n' "$V2411_ROOT"
        printf 'BINDS=(%s)\n' "$(printf '%q ' "${binds[@]}")"
        cat <<'EOF'
[[ -e /etc/ddpctl-slurm-root ]] && exec "$@"
if [[ ${1-} != --in-namespace ]]; then
    exec unshare --mount --propagation private -- "$0" --in-namespace "$PWD" "$@"
fi
cwd=$2
shift 2
for b in "${BINDS[@]}"; do
    mount --rbind "$b" "$ROOT$b" || exit 125
done
exec chroot "$ROOT" /bin/sh -c 'cd "$1" || { echo "Slurm 24.11 root: no directory $1 in it" >&2; exit 125; }
    shift; exec "$@"' sh "$cwd" "$@"
EOF
    } >"$V2411_ENTER.new"
    chmod 755 "$V2411_ENTER.new"
    mv -f "$V2411_ENTER.new" "$V2411_ENTER"
    # The host's client commands enter one mount namespace that keeps the binds (`ensure_client_ns_2411`)
    # instead of building their own: unshare + ~20 bind mounts cost each command ~20 ms, and concurrent
    # commands queue on the mount lock, a cost no Slurm site has (submit runs several). Falls back to enter.
    {
        echo '#!/bin/bash'
        echo "# Generated by tests/cluster/start.sh: a host client command, run inside the Slurm $V2411 root."
        printf 'ROOT=%q\nENTER=%q\nPIDFILE=%q\n' "$V2411_ROOT" "$V2411_ENTER" "$V2411_CLIENT_NS"
        cat <<'EOF2'
pid=$(cat "$PIDFILE" 2>/dev/null) || pid=
if [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == sleep ]]; then
    exec nsenter --mount="/proc/$pid/ns/mnt" -- chroot "$ROOT" /bin/sh -c 'cd "$1" || exit 125; shift; exec "$@"' \
        sh "$PWD" "$@"
fi
exec "$ENTER" "$@"
EOF2
    } >"$V2411_DIR/client.new"
    chmod 755 "$V2411_DIR/client.new"
    mv -f "$V2411_DIR/client.new" "$V2411_DIR/client"
    rm -f "$BIN_2411"/*
    for cmd in $(chroot "$V2411_ROOT" dpkg -L slurm-client | grep '^/usr/bin/.'); do
        printf '#!/bin/sh\nexec %q %q "$@"\n' "$V2411_DIR/client" "$cmd" >"$BIN_2411/${cmd##*/}"
        chmod 755 "$BIN_2411/${cmd##*/}"
    done
}

# The mount namespace the host's client commands enter: a sleeping holder process keeps it (and its binds).
ensure_client_ns_2411() {
    local i binds
    pidfile_alive "$V2411_CLIENT_NS" sleep && return 0
    rm -f "$V2411_CLIENT_NS"
    mapfile -t binds < <(root_binds_2411)
    # The holder is the shell's background child, so nothing of ours waits on it: a `run_daemon ... &` would
    # leave a subshell of start.sh (holding start.sh's lock) as its parent for its lifetime.
    # shellcheck disable=SC2016  # expanded by the holder's own shell
    run_daemon unshare --mount --propagation private -- /bin/bash -c '
        pidfile=$1 root=$2
        shift 2
        for b in "$@"; do mount --rbind "$b" "$root$b" || exit 125; done
        sleep infinity &
        echo $! >"$pidfile"' holder "$V2411_CLIENT_NS" "$V2411_ROOT" "${binds[@]}" </dev/null >/dev/null 2>&1
    for ((i = 0; i < 50; i++)); do
        pidfile_alive "$V2411_CLIENT_NS" sleep && return 0
        sleep 0.1
    done
    log "no mount namespace holder for the $V2411 clients: each command builds its own (slower)"
}

stop_client_ns_2411() {
    stop_pidfile "$V2411_CLIENT_NS" sleep
}

# munged of the root (its socket is the root's /run/munge/munge.socket.2, where the root's Slurm looks).
ensure_munge_2411() {
    local i r=$V2411_ROOT
    if "$V2411_ENTER" sh -c 'munge -n | unmunge' >/dev/null 2>&1; then
        return 0
    fi
    install -d -m 0755 "$r/run/munge"
    chroot "$r" sh -c 'chown munge:munge /run/munge /var/log/munge /var/lib/munge'
    rm -f "$r/run/munge/munge.socket.2" "$r/run/munge/munge.socket.2.lock" "$r/run/munge/munged.pid"
    run_daemon "$V2411_ENTER" runuser -u munge -- /usr/sbin/munged --force
    for ((i = 0; i < 50; i++)); do
        "$V2411_ENTER" sh -c 'munge -n | unmunge' >/dev/null 2>&1 && { log "munged ($V2411 root) started"; return 0; }
        sleep 0.1
    done
    tail -n 20 "$r/var/log/munge/munged.log" >&2 || true
    die "munged in the Slurm $V2411 root did not start"
}

stop_munge_2411() {
    [[ -d $V2411_ROOT ]] && stop_pidfile "$V2411_ROOT/run/munge/munged.pid" munged
    return 0
}
