#!/usr/bin/env bash
# run-all.sh - everything CI runs: install dependencies, build, make sure the
# test VMs exist, run the test suite.  Exit status: the suite's; the last
# line is always "N passed, N failed, N skipped".
#
#   ./tests/run-all.sh [--suite S] [PYTEST ARGS...]
#       default   (CI, README) the default targets, plain and sanitized
#       matrix    every release x flavour x debug level, ends with a
#                 pass/fail table per VM
#       package   the Debian package: scripts/build-deb.sh, installed into a
#                 clean debootstrapped root (cached) and run there
#       fuzz      long fuzzing: every libFuzzer target 120 s
#                 (tests/fuzz/build.sh) and 60 s of corrupted reads of real VMs
#       soak      a 10-minute 997 Hz run, RSS and fds watched
#   PYTEST ARGS (e.g. -k NAME, --vm NAME) go to every pytest run below.
#
# Needs root on a fresh Debian 12 machine (apt-get; the tools read other
# processes' memory).  Steps:
#   1. apt-get install the packages below that are missing (apt-get update
#      first, only if something is missing)
#   2. ./build.sh, and for the default suite XB_SANITIZE=1 ./build.sh
#   3. tests/build-vms.sh default   (cached under /var/cache/extrospect-beam;
#      matrix: tests/build-vms.sh matrix; fuzz and soak run on the default
#      targets; package: the stock VM only)
#   4. default suite only: tests/mutation-check.sh (the suite must fail on a
#      compile error and on four deliberately broken tools); XB_NO_MUTATION=1
#      or any PYTEST ARGS leave it out; a failure is counted in the summary
#   5. the C unit tests: meson test -C build (default suite: and -C
#      build-asan), each case counted
#   6. pytest --strict-suite (tests/conftest.py): a skip without a
#      documented reason acceptable in CI, a target that is not built, a test
#      no target of the suite runs, an unknown --vm or a stale build is a
#      failure.  Default suite: with --asan --asan-capture perf (the
#      sanitizer pass on the perf path, the plain one on the default path),
#      first the saturated tier (-m saturated: the tests that must run
#      alone), then the rest on two pytest-xdist workers (-n 2)
#   7. tests/lib/summary.py adds up steps 4-6 (and counts a run of steps 5-6
#      longer than 25 minutes in the default suite as one more failure: a
#      guard against a suite that grows or hangs)
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
      # names, lines, live view, package
      elixir tmux linux-perf debuginfod libdebuginfod-dev debootstrap dpkg-dev
      # independent checks
      strace binutils util-linux libcap2-bin git
      # the runner: pytest, its per-test time limits, its parallel workers
      python3-pytest python3-pytest-timeout python3-pytest-xdist)
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
# jobs: pytest-xdist workers for the tests that may run side by side (the
# saturated tier runs first, alone); limit: the guard on steps 5-6
jobs=1 limit=
case $suite in
    default) pyargs=(--strict-suite --asan --asan-capture perf) jobs=2 limit=1500 ;;
    matrix) pyargs=(--strict-suite --table) ;;
    package | fuzz | soak) pyargs=(--strict-suite) ;;
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

summary=()
if [[ $suite == default && ${XB_NO_MUTATION:-0} != 1 && $# -eq 0 ]]; then
    tests/mutation-check.sh >&2 ||
        summary+=(--failure "run-all.sh: tests/mutation-check.sh FAILED: the suite does not catch a broken tool (its output is above)")
fi

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
summary+=(--started "$(date +%s)" ${limit:+--time-limit "$limit"})
builds=(build)
[[ $suite == default ]] && builds+=(build-asan)
for b in "${builds[@]}"; do
    rc=0
    meson test -C "$b" --logbase unit --print-errorlogs || rc=$?
    summary+=(--meson "$b" "$rc")
done
pytest=(/usr/bin/python3 -m pytest -v --durations=10 --suite "$suite" "${pyargs[@]}")
args=("$@")
run_pytest() {  # NAME [OPTION...]: one pytest run, its results for the summary
    local name=$1 rc=0
    shift
    "${pytest[@]}" "$@" --results "$results/$name.json" "${args[@]}" || rc=$?
    summary+=(--pytest "$results/$name.json" "$rc")
}
if [[ $jobs -gt 1 ]]; then
    run_pytest saturated -m saturated
    run_pytest shared -m "not saturated" -n "$jobs"
else
    run_pytest all
fi
/usr/bin/python3 tests/lib/summary.py "${summary[@]}"
