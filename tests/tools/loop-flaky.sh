#!/bin/sh
# tests/tools/loop-flaky.sh - two tests once flaky on a loaded machine, 20
# times in a row each while the machine is saturated (one busy loop per CPU,
# at normal priority, for the whole run):
#   tests/acceptance/test_sample.py::test_idle_pstack[otp29-jit]
#   tests/acceptance/test_sample.py::test_vm_killed_midrun[otp25-jit-dwarf]
# Usage: tests/tools/loop-flaky.sh [N]   (default 20; XB_FLAKY_TESTS="ID..."
# replaces the two: pytest node ids, the target in brackets).  Exit 1 on the
# first failure (its output is shown), 0 when all passed.
set -u
set -f  # test ids hold brackets: no globbing
cd "$(dirname "$0")/../.."
n=${1:-20}
hogs=""
for _ in $(seq "$(nproc)"); do
	sh -c 'while :; do :; done' &
	hogs="$hogs $!"
done
trap 'kill $hogs 2>/dev/null' EXIT INT TERM
fail=0
for t in ${XB_FLAKY_TESTS:-"tests/acceptance/test_sample.py::test_idle_pstack[otp29-jit]" "tests/acceptance/test_sample.py::test_vm_killed_midrun[otp25-jit-dwarf]"}; do
	vm=$(echo "$t" | sed 's/.*\[\(.*\)\]/\1/')
	for i in $(seq "$n"); do
		if out=$(/usr/bin/python3 -m pytest --vm "$vm" "$t" 2>&1); then
			echo "PASS $t ($i/$n)"
		else
			echo "FAIL $t ($i/$n)"
			echo "$out" | sed 's/^/    /'
			fail=1
			break
		fi
	done
done
[ $fail = 0 ] && echo "all passed $n times in a row on a saturated machine (load: $(cut -d' ' -f1-3 /proc/loadavg))"
exit $fail
