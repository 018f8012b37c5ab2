#!/usr/bin/env bash
# run-all.sh - everything CI runs: install dependencies, build, make sure the
# test VMs exist, run the default test suite.  Exit status: the suite's.
#
#   ./tests/run-all.sh                  default suite (CI, README)
#   ./tests/run-all.sh --suite matrix   every release x flavour x debug level,
#                                       ends with a pass/fail table
#   ./tests/run-all.sh --suite package  the Debian package: scripts/build-deb.sh,
#                                       installed into a clean debootstrapped
#                                       root (cached) and run there
#
# Needs root on a fresh Debian 12 machine (apt-get; the tools read other
# processes' memory).  Steps:
#   1. apt-get install the packages below that are missing (apt-get update
#      first, only if something is missing)
#   2. ./build.sh
#   3. tests/build-vms.sh default   (cached under /var/cache/extrospect-beam)
#   4. python3 tests/run.py --suite default   (last line: "N passed, N failed, N skipped")
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(python3 erlang-base erlang-dev libdw-dev libelf-dev meson ninja-build pkg-config gcc
      clang libbpf-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
      # the output formats' real consumers (tests/acceptance/test_formats.py)
      golang-go chromium chromium-driver python3-selenium python3-jsonschema
      # names, lines, live view, package (issue 14)
      elixir tmux linux-perf debuginfod libdebuginfod-dev debootstrap dpkg-dev)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "run-all.sh: missing packages: ${missing[*]} (run as root to install them)" >&2
        exit 1
    fi
    echo "run-all.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi

suite=default
if [[ ${1:-} == --suite ]]; then
    suite=${2:?--suite needs default, matrix or package}
    shift 2
fi
case $suite in
    default) extra=(--asan) ;;
    matrix) extra=(--table) ;;
    package) extra=() ;;
    *) echo "run-all.sh: --suite is default, matrix or package, not '$suite'" >&2; exit 2 ;;
esac

./build.sh
[[ $suite == default ]] && XB_SANITIZE=1 ./build.sh   # the suite runs again under ASan/UBSan
[[ $suite == package ]] || tests/build-vms.sh "$suite"   # package: the stock VM only
exec /usr/bin/python3 tests/run.py --suite "$suite" "${extra[@]}" "$@"
