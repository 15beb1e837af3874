#!/usr/bin/env bash
# -DBUILD_TESTING=OFF configures with Catch2 out of reach (CMAKE_DISABLE_FIND_PACKAGE_Catch2
# makes any find_package(Catch2) fail) and leaves every test and benchmark target out,
# while what is installed stays in.
#
#   without_tests.sh CMAKE SOURCE_DIR
set -euo pipefail
cmake=$1
source=$2
scratch=$(mktemp -d /tmp/comfy-install-notests-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

"$cmake" -S "$source" -B "$scratch" -DBUILD_TESTING=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON >"$scratch/configure.log" 2>&1 ||
    { cat "$scratch/configure.log" >&2; echo "without_tests: configuring with BUILD_TESTING=OFF failed" >&2; exit 1; }
targets=$("$cmake" --build "$scratch" --target help)
for wanted in comfy-supervisor comfy-worker comfyctl comfy_participant install; do
    grep -qx "\.\.\. $wanted" <<<"$targets" || { echo "without_tests: no target $wanted" >&2; exit 1; }
done
unwanted=$(grep -E '^\.\.\. (test_|bench-|fuzz-|comfy-soak|comfy_test_support|misbehaving-worker)' <<<"$targets" || true)
if [ -n "$unwanted" ]; then
    echo "without_tests: BUILD_TESTING=OFF still has targets: $(echo $unwanted)" >&2
    exit 1
fi
echo "without_tests: BUILD_TESTING=OFF configures without Catch2 and builds only what is installed"
