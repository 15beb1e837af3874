#!/usr/bin/env bash
# The installed participant library from a program outside this project, found both ways
# docs/INSTALL.md gives: find_package(comfy_supervisor) (tests/install/consumer) and
# pkg-config comfy_participant. Each build must run, and the tree is moved after install
# first: both must find it where it is now.
#
#   consumer.sh CMAKE BUILD_DIR SOURCE_DIR
set -euo pipefail
cmake=$1
build=$2
source=$3
scratch=$(mktemp -d /tmp/comfy-install-consumer-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

"$cmake" --install "$build" --prefix "$scratch/installed" >/dev/null
mv "$scratch/installed" "$scratch/prefix"
prefix="$scratch/prefix"

"$cmake" -S "$source/tests/install/consumer" -B "$scratch/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
"$cmake" --build "$scratch/cmake-build" >/dev/null
"$scratch/cmake-build/consumer"

libdir=$(dirname "$(find "$prefix" -name comfy_participant.pc)")
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs comfy_participant)
version=$(PKG_CONFIG_PATH="$libdir" pkg-config --modversion comfy_participant)
cc -o "$scratch/pkg-config-consumer" "$source/tests/install/consumer/main.c" $flags
LD_LIBRARY_PATH="$(dirname "$libdir")" "$scratch/pkg-config-consumer"

# What a program linked against it records: the SONAME of this minor version.
soname=$(objdump -p "$(dirname "$libdir")/libcomfy_participant.so" | awk '$1 == "SONAME" { print $2 }')
needed=$(objdump -p "$scratch/pkg-config-consumer" | awk '$1 == "NEEDED" && /comfy/ { print $2 }')
if [ "$soname" != "libcomfy_participant.so.${version%.*}" ] || [ "$needed" != "$soname" ]; then
    echo "consumer: the library's SONAME is '$soname' and the program needs '$needed'," \
        "not libcomfy_participant.so.${version%.*}" >&2
    exit 1
fi
echo "consumer: find_package and pkg-config (version $version) both found the installed library, SONAME $soname"
