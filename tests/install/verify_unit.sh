#!/usr/bin/env bash
# The systemd unit as cmake --install writes it: its ExecStart must be the installed
# comfy-supervisor, and `systemd-analyze verify` must accept an instance of it without a
# word (it warns on stderr and still exits 0 for a bad setting, so any output fails). Runs
# with or without systemd as PID 1: verify only loads the unit files. Then the installed
# sysusers file must make the unit's user, in the GPU's groups, in a root of its own.
#
#   verify_unit.sh CMAKE BUILD_DIR
set -euo pipefail
cmake=$1
build=$2
command -v systemd-analyze >/dev/null ||
    { echo "verify_unit: systemd-analyze is missing; install Debian's systemd (scripts/setup does)" >&2; exit 1; }
scratch=$(mktemp -d /tmp/comfy-install-unit-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

"$cmake" --install "$build" --prefix "$scratch" >/dev/null
unit="$scratch/lib/systemd/system/comfy-supervisor@.service"
expected="ExecStart=$scratch/bin/comfy-supervisor run --config /etc/comfy-supervisor/%i.json --instance %i"
if ! grep -qxF "$expected" "$unit"; then
    echo "verify_unit: $unit has '$(grep '^ExecStart=' "$unit")', not '$expected'" >&2
    exit 1
fi
# An instance's path beside the template: verify loads the template for it.
output=$(cd "$scratch" && systemd-analyze verify "$scratch/lib/systemd/system/comfy-supervisor@gpu0.service" 2>&1) || {
    echo "verify_unit: systemd-analyze verify failed: $output" >&2
    exit 1
}
if [ -n "$output" ]; then
    echo "verify_unit: systemd-analyze verify found problems: $output" >&2
    exit 1
fi
root="$scratch/sysroot"
mkdir -p "$root/etc"
output=$(systemd-sysusers --root "$root" "$scratch/lib/sysusers.d/comfy-supervisor.conf" 2>&1) || {
    echo "verify_unit: systemd-sysusers refused the installed sysusers file: $output" >&2
    exit 1
}
user=$(sed -n 's/^\(comfy-supervisor\):[^:]*:[0-9]*:[0-9]*:[^:]*:\([^:]*\):.*/\1 \2/p' "$root/etc/passwd")
for group in video render; do
    grep -q "^$group:.*comfy-supervisor" "$root/etc/group" ||
        { echo "verify_unit: the sysusers file does not put comfy-supervisor in $group" >&2; exit 1; }
done
if [ "$user" != "comfy-supervisor /var/lib/comfy-supervisor" ] || ! grep -qx "StateDirectory=comfy-supervisor" "$unit"; then
    echo "verify_unit: the sysusers user ($user) and the unit's StateDirectory do not agree" >&2
    exit 1
fi
echo "verify_unit: systemd-analyze verify accepts comfy-supervisor@gpu0.service, ExecStart the installed binary;" \
    "the sysusers file makes its user, home /var/lib/comfy-supervisor, in video and render"
