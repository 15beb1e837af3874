#!/usr/bin/env bash
# The unit under a real systemd: boots Debian's systemd (/lib/systemd/systemd) as PID 1 of
# a throw-away container, installs the project into the container's root
# (cmake --install --prefix /usr/local) and shows with systemd's own tools that
#   - a slow host: a ComfyUI stand-in that says Hello only after longer than the unit's
#     TimeoutStartSec=90s (tests/supervisor/ops' reference worker as the host, behind a
#     sleep) is waited for: `systemctl start` succeeds once it joined, the unit active,
#     and `systemctl show -p StatusText` showed the supervisor's stages meanwhile;
#   - a late driver: a CUDA device that stays unusable (device.wait_ms of a second) ends
#     the start with status 75, which systemd restarts (NRestarts grows); a bad config
#     (status 2) is not restarted (RestartPreventExitStatus=2).
# It takes about two minutes (the slow host alone is 95 s), so CTest has it only with
# -DCOMFY_BOOT_TESTS=ON; scripts/boot-check runs it.
#
# The container cannot write to this machine: its root is an overlay whose lower layer is
# the real / (read-only) and whose upper layer is a scratch folder under /var/tmp, mounted
# in private mount, PID, network, UTS, IPC and cgroup namespaces, entered by pivot_root
# (the real / is then detached from them); /proc/sys and /sys are read-only, /dev, /run,
# /tmp and /var/tmp are fresh tmpfs, the cgroup tree is a cgroup of its own. Every unit
# and generator of the machine is masked but journald's; systemd boots to a target of
# this test's that wants nothing else. Before systemd starts the overlay is checked to be
# the root it gets, and after the teardown sentinel files in the real /tmp and /var/tmp
# (older than tmpfiles' ages) must still be there, with no daemon of the container left.
#
#   systemd_boot.sh CMAKE BUILD_DIR
# Exit 77 (CTest: skipped) with one line where it cannot run: not root, no namespaces,
# overlayfs over / refused, no cgroup2, no /lib/systemd/systemd.
set -euo pipefail

slow_host_seconds=95  # just over the unit's TimeoutStartSec=90s
box_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# --- Inside the namespaces (PID 1 there until it execs systemd) -------------------------
if [ "${1:-}" = --inside ]; then
    scratch=$2 cmake=$3 build=$4
    root="$scratch/root"
    mount --make-rprivate /
    if ! mount -t overlay comfy-boot -o "lowerdir=/,upperdir=$scratch/upper,workdir=$scratch/work" "$root"; then
        echo "systemd_boot: SKIP: the kernel refused an overlay over / (overlayfs); the test needs one"
        exit 77
    fi
    # The root systemd gets is that overlay, and a write to it lands in the upper layer only.
    [ "$(findmnt -n -o FSTYPE --mountpoint "$root")" = overlay ] ||
        { echo "systemd_boot: $root is not the overlay; not booting"; exit 1; }
    probe=".comfy-boot-probe-$$"
    echo probe >"$root/$probe"
    if [ ! -f "$scratch/upper/$probe" ] || [ -e "/$probe" ]; then
        echo "systemd_boot: a write to the overlay did not land in its upper layer alone; not booting"
        exit 1
    fi
    rm "$root/$probe"

    mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
    for entry in sys sysrq-trigger irq bus fs; do  # the kernel's knobs stay the machine's
        [ -e "$root/proc/$entry" ] || continue
        mount --bind "$root/proc/$entry" "$root/proc/$entry"
        mount -o remount,bind,ro "$root/proc/$entry"
    done
    mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
    mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$root/sys/fs/cgroup"
    mount -t tmpfs -o nosuid,mode=755,size=16m comfy-boot-dev "$root/dev"
    for node in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
        IFS=: read -r name major minor <<<"$node"
        mknod -m 666 "$root/dev/$name" c "$major" "$minor"
    done
    mkdir "$root/dev/pts" "$root/dev/shm"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
    ln -s pts/ptmx "$root/dev/ptmx"
    mount -t tmpfs -o nosuid,nodev,mode=1777 comfy-boot-shm "$root/dev/shm"
    ln -s /proc/self/fd "$root/dev/fd"
    touch "$root/dev/console"  # systemd's own log, in a file of the scratch folder
    mount --bind "$scratch/console" "$root/dev/console"
    mount -t tmpfs -o nosuid,nodev,mode=755 comfy-boot-run "$root/run"
    mount -t tmpfs -o nosuid,nodev,mode=1777 comfy-boot-tmp "$root/tmp"
    mount -t tmpfs -o nosuid,nodev,mode=1777 comfy-boot-vartmp "$root/var/tmp"  # hides the scratch folder too

    # Every unit and generator of this machine masked, but what the test needs.
    keep='^(comfy-supervisor@\.service|systemd-journald(\.service|\.socket|-dev-log\.socket)'
    keep+='|systemd-(poweroff|halt|exit)\.service|.*\.target|.*\.slice)$'
    mkdir -p "$root/etc/systemd/system" "$root/etc/systemd/system-generators"
    for dir in etc/systemd/system lib/systemd/system usr/lib/systemd/system usr/local/lib/systemd/system; do
        for unit in "$root/$dir"/*; do
            name=${unit##*/}
            [ -d "$unit" ] || [[ "$name" =~ $keep ]] ||
                [[ ! "$name" =~ \.(service|socket|timer|path|mount|automount|swap)$ ]] ||
                ln -sfn /dev/null "$root/etc/systemd/system/$name"
        done
    done
    for dir in lib usr/lib usr/local/lib; do
        for generator in "$root/$dir/systemd/system-generators"/*; do
            [ -e "$generator" ] && ln -sfn /dev/null "$root/etc/systemd/system-generators/${generator##*/}"
        done
    done
    printf '%s\n' '[Unit]' 'Description=comfy-supervisor boot test: journald and nothing else' \
        'Wants=systemd-journald.socket systemd-journald-dev-log.socket systemd-journald.service' \
        >"$root/etc/systemd/system/comfy-boot.target"

    DESTDIR="$root" "$cmake" --install "$build" --prefix /usr/local >/dev/null
    systemd-sysusers --root="$root" >/dev/null
    configs="$root/etc/comfy-supervisor"
    mkdir -p "$configs"
    echo '{"nodes": {"noop": [{"op": "compute", "ms": 1}]}}' >"$configs/idle.pack.json"
    pack='{"name": "alpha", "command": "/usr/local/bin/comfy-worker",
           "args": ["--pack", "/etc/comfy-supervisor/idle.pack.json"]}'
    cat >"$configs/slow.json" <<EOF
{"device": {"kind": "simulated", "total_bytes": "24GiB"}, "limits": {"shutdown_grace_ms": 2000},
 "comfyui": {"command": "/bin/sh", "args": ["-c",
     "sleep $slow_host_seconds; exec /usr/local/bin/comfy-worker --pack /etc/comfy-supervisor/idle.pack.json"]},
 "packs": [$pack]}
EOF
    echo "{\"device\": {\"kind\": \"cuda\", \"index\": 0, \"wait_ms\": 1000}, \"packs\": [$pack]}" >"$configs/late.json"
    echo '{"packs": []' >"$configs/bad.json"
    chmod 644 "$configs"/*.json

    cd "$root"
    pivot_root . .
    umount -l .  # the real /, now above the overlay: detached from these namespaces
    cd /
    exec env -i container=comfy-boot-test TERM=dumb /lib/systemd/systemd --unit=comfy-boot.target --log-level=info
fi

# --- Outside: set up, boot, check, tear down ---------------------------------------------
cmake=$1
build=$2
skip() { echo "systemd_boot: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (an overlay over / and namespaces of its own)"
[ -x /lib/systemd/systemd ] || skip "no /lib/systemd/systemd (Debian's systemd package)"
for tool in unshare nsenter pivot_root findmnt systemd-sysusers; do
    command -v "$tool" >/dev/null || skip "no $tool"
done
grep -qw overlay /proc/filesystems || skip "the kernel has no overlayfs"
cgroups=""
for candidate in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ "$(stat -f -c %T "$candidate" 2>/dev/null)" = cgroup2fs ] && { cgroups=$candidate; break; }
done
[ -n "$cgroups" ] || skip "no cgroup2 hierarchy mounted (systemd needs a cgroup tree of its own)"
unshare --mount --pid --net --uts --ipc --cgroup --fork true 2>/dev/null || skip "cannot make namespaces here"

scratch=$(mktemp -d /var/tmp/comfy-boot-XXXXXX)
cgroup="$cgroups/${scratch##*/}"
mkdir "$cgroup" || skip "cannot make a cgroup under $cgroups"
mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
touch "$scratch/console"
# Older than any tmpfiles age: a cleaning of the real /tmp or /var/tmp would remove them.
sentinels=("$(mktemp /tmp/comfy-boot-sentinel-XXXXXX)" "$(mktemp /var/tmp/comfy-boot-sentinel-XXXXXX)")
touch -d '60 days ago' "${sentinels[@]}"
tmp_before=$(ls -A /tmp | wc -l)
passwd_before=$(md5sum </etc/passwd)  # the container's systemd-sysusers adds its user to its own copy

unshare_pid="" pid1="" container=false
teardown() {
    if [ -n "$pid1" ] && kill -0 "$pid1" 2>/dev/null; then
        # poweroff only in a container systemd knows as one (it then leaves swap, loop
        # devices and the clock alone); SIGKILL to the namespace's PID 1 ends the rest.
        if $container; then
            kill -s RTMIN+4 "$pid1" 2>/dev/null || true
            for _ in $(seq 100); do kill -0 "$pid1" 2>/dev/null || break; sleep 0.2; done
        fi
        kill -s KILL "$pid1" 2>/dev/null || true
    fi
    [ -z "$unshare_pid" ] || wait "$unshare_pid" 2>/dev/null || true
    [ ! -d "$cgroup" ] || find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
    rm -rf "$scratch"
}
fail() {
    echo "systemd_boot: $*" >&2
    echo "--- systemd's console (last lines):" >&2
    tail -n 40 "$scratch/console" >&2 || true
    echo "--- the namespace's setup:" >&2
    tail -n 20 "$scratch/setup.log" >&2 || true
    exit 1
}
trap 'teardown; rm -f "${sentinels[@]}"' EXIT

(
    echo "$BASHPID" >"$cgroup/cgroup.procs"  # the container's cgroup namespace is rooted here
    exec unshare --mount --pid --net --uts --ipc --cgroup --fork --propagation private -- \
        "$0" --inside "$scratch" "$cmake" "$build"
) >"$scratch/setup.log" 2>&1 &
unshare_pid=$!

# The namespace's PID 1 as this machine sees it, once it is systemd.
for _ in $(seq 600); do
    if ! kill -0 "$unshare_pid" 2>/dev/null; then
        status=0
        wait "$unshare_pid" || status=$?
        unshare_pid=""
        if [ "$status" = 77 ]; then cat "$scratch/setup.log"; exit 77; fi
        fail "the namespace's setup ended (status $status) before systemd started"
    fi
    pid1=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | awk '{print $1}')
    [ -n "$pid1" ] && [ "$(cat "/proc/$pid1/comm" 2>/dev/null)" = systemd ] && break
    pid1=""
    sleep 0.1
done
[ -n "$pid1" ] || fail "systemd did not start within a minute"

box() {
    nsenter --target "$pid1" --mount --pid --net --uts --ipc --cgroup --root --wd -- \
        env -i PATH="$box_path" SYSTEMD_PAGER=cat SYSTEMD_COLORS=0 "$@"
}
# The root systemd runs in is the overlay, it knows itself in a container, and it is up.
root_type=$(box findmnt -n -o FSTYPE --mountpoint /) || fail "cannot enter the container"
[ "$root_type" = overlay ] || fail "the container's / is $root_type, not the overlay"
virt=$(box systemd-detect-virt --container || true)
[ "$virt" != none ] && [ -n "$virt" ] || fail "systemd does not see a container (systemd-detect-virt: '$virt')"
container=true
pid_namespace=$(readlink "/proc/$pid1/ns/pid")
state=""
for _ in $(seq 300); do
    state=$(box systemctl is-system-running 2>/dev/null || true)
    case "$state" in running|degraded) break ;; esac
    sleep 0.2
done
case "$state" in running|degraded) ;; *) fail "systemd did not finish booting (is-system-running: '$state')" ;; esac
echo "systemd_boot: systemd $(box systemctl --version | awk 'NR==1 {print $2}') is PID 1 of a container" \
    "($virt), its / the overlay; booted to comfy-boot.target ($state)"

show() { box systemctl show -P "$2" "comfy-supervisor@$1.service"; }

# 1. The slow host: start (blocking) in the background, StatusText polled meanwhile.
started=$(date +%s)
box systemctl start comfy-supervisor@slow.service >"$scratch/start.log" 2>&1 &
start_pid=$!

# 2. Meanwhile the late driver and the bad config.
box systemctl start --no-block comfy-supervisor@late.service
bad_status=0
box systemctl start comfy-supervisor@bad.service 2>/dev/null || bad_status=$?
[ "$bad_status" != 0 ] || fail "systemctl start of the bad config succeeded"

statuses=()
while kill -0 "$start_pid" 2>/dev/null; do
    text=$(show slow StatusText || true)
    if [ -n "$text" ] && { [ ${#statuses[@]} = 0 ] || [ "${statuses[-1]}" != "$text" ]; }; then
        statuses+=("$text")
        echo "systemd_boot: +$(( $(date +%s) - started ))s StatusText=$text"
    fi
    sleep 1
done
start_status=0
wait "$start_pid" || start_status=$?
took=$(( $(date +%s) - started ))
[ "$start_status" = 0 ] ||
    fail "systemctl start comfy-supervisor@slow failed ($start_status): $(cat "$scratch/start.log")"
echo "systemd_boot: systemctl start comfy-supervisor@slow returned 0 after ${took}s"
[ "$took" -gt 90 ] || fail "the start took ${took}s, not more than TimeoutStartSec=90s: the host was not slow"
active=$(show slow ActiveState)
[ "$active" = active ] || fail "comfy-supervisor@slow is $active after its start, not active"
ready_text=$(show slow StatusText)
echo "systemd_boot: comfy-supervisor@slow ActiveState=$active StatusText=$ready_text"
printf '%s\n' "${statuses[@]}" | grep -q "waiting for host" ||
    fail "StatusText never said the host was awaited during the start: ${statuses[*]}"
[ "$ready_text" = "2 of 2 participants up" ] || fail "StatusText once ready is '$ready_text'"

# 2, checked: the late driver restarted at least twice, each run ending with status 75.
restarts=0
for _ in $(seq 60); do
    restarts=$(show late NRestarts)
    [ "$restarts" -ge 2 ] && break
    sleep 1
done
late_exits=$(box journalctl -b -o cat -u comfy-supervisor@late.service | grep -c "status=75/TEMPFAIL" || true)
echo "systemd_boot: comfy-supervisor@late NRestarts=$restarts, runs that ended status=75/TEMPFAIL: $late_exits"
[ "$restarts" -ge 2 ] || fail "comfy-supervisor@late was restarted $restarts times, not at least twice"
[ "$late_exits" -ge 2 ] || fail "comfy-supervisor@late's runs did not end with status 75"
box journalctl -b -o cat -u comfy-supervisor@late.service | grep -m1 "CUDA device 0" |
    sed 's/^/systemd_boot: late journal: /' || true

bad_exit=$(show bad ExecMainStatus)
bad_state=$(show bad ActiveState)
bad_restarts=$(show bad NRestarts)
echo "systemd_boot: comfy-supervisor@bad ActiveState=$bad_state ExecMainStatus=$bad_exit NRestarts=$bad_restarts" \
    "(systemctl start exit $bad_status)"
box journalctl -b -o cat -u comfy-supervisor@bad.service | grep -m1 "bad.json" |
    sed 's/^/systemd_boot: bad journal: /' || true
[ "$bad_exit" = 2 ] && [ "$bad_state" = failed ] && [ "$bad_restarts" = 0 ] ||
    fail "the bad config's unit is not failed with status 2 and no restart"

# The host's own lines in the journal: it joined after the sleep.
box journalctl -b -o cat -u comfy-supervisor@slow.service | tail -n 8 | sed 's/^/systemd_boot: slow journal: /'

teardown
pid1=""
unshare_pid=""
for sentinel in "${sentinels[@]}"; do
    [ -e "$sentinel" ] ||
        { echo "systemd_boot: $sentinel was removed: the container reached the real filesystem" >&2; exit 1; }
done
leftover=$(for pid in /proc/[0-9]*; do
    if [ "$(readlink "$pid/ns/pid" 2>/dev/null)" = "$pid_namespace" ]; then echo "${pid#/proc/}"; fi
done)
[ -z "$leftover" ] || { echo "systemd_boot: processes of the container outlived it: $leftover" >&2; exit 1; }
[ "$(md5sum </etc/passwd)" = "$passwd_before" ] ||
    { echo "systemd_boot: the real /etc/passwd changed: the container reached the real filesystem" >&2; exit 1; }
echo "systemd_boot: torn down; the real /tmp kept its entries (${tmp_before} before, $(ls -A /tmp | wc -l) now)" \
    "and its 60-day-old sentinel"
