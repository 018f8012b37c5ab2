#!/usr/bin/env bash
# tests/soak-saturated.sh - the default suite, N times in a row, on a machine
# saturated by busy loops outside the VMs (the suite must pass 5 times in a
# row so).
#
#   tests/soak-saturated.sh [-n RUNS] [-l LOOPS_PER_CORE] [-- RUN-ALL ARGS...]
#
# Starts LOOPS_PER_CORE (default 2) busy loops per online CPU (plain shell
# loops at normal priority, so they compete with the VMs and the tools on
# equal terms), then runs `XB_NO_MUTATION=1 tests/run-all.sh` (with the
# arguments given after --) RUNS times (default 5), printing each run's
# summary line and duration, and each run's failures.  Logs:
# tests/out/soak-RUN.log.  The busy loops are killed at the end (by the PIDs
# this script started).  Run tests/run-all.sh once before: its installs,
# builds and VMs are then no-ops in each run here.
#
# Exit status 0 iff every run passed.  5 runs of the default suite take
# well over an hour on a saturated 2-core machine.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=5
per_core=2
while [[ $# -gt 0 ]]; do
    case $1 in
        -n) runs=$2; shift 2 ;;
        -l) per_core=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "usage: $0 [-n RUNS] [-l LOOPS_PER_CORE] [-- RUN-ALL ARGS...]" >&2; exit 2 ;;
    esac
done
args=("$@")

cores=$(nproc)
loops=()
runner=
stop_loops() {
    [[ -n $runner ]] && kill -TERM -- "-$runner" 2>/dev/null
    for p in "${loops[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${loops[@]}"; do wait "$p" 2>/dev/null; done
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < cores * per_core; i++)); do
    bash -c 'while :; do :; done' &
    loops+=($!)
done
echo "soak: ${#loops[@]} busy loops on $cores CPUs (pids ${loops[*]}); $runs runs of run-all.sh ${args[*]}"

mkdir -p tests/out
passed=0
for ((r = 1; r <= runs; r++)); do
    log=tests/out/soak-$r.log
    t0=$(date +%s)
    # In the background and waited for, so that a signal to this script
    # is handled at once (bash runs traps only between foreground
    # commands) and the runner, its pytest workers and their VMs go with it.
    XB_NO_MUTATION=1 setsid tests/run-all.sh "${args[@]}" >"$log" 2>&1 &
    runner=$!
    wait "$runner"
    rc=$?
    runner=
    took=$(( $(date +%s) - t0 ))
    summary=$(tail -n 1 "$log")
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "soak: run $r/$runs: exit $rc in ${took}s (load $load): $summary"
    sed -n '/^failed ([0-9]*):$/,$p' "$log" | sed '1d;$d' | sed 's/^/  /'
    [[ $rc -eq 0 ]] && passed=$((passed + 1))
done
echo "soak: $passed of $runs runs passed"
[[ $passed -eq $runs ]]
