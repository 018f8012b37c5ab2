#!/bin/sh
# build.sh - install build dependencies (Debian packages) and build.
# Usage: ./build.sh [meson setup options...]
#   XB_SANITIZE=1 ./build.sh   builds with ASan/UBSan into build-asan/
#
# Exit status non-zero when anything fails: a missing package, meson, ninja
# (a compile error), or any binary of OUTPUTS missing or older than the
# sources afterwards (so a failed build can never leave the previous
# binaries looking current).
set -eu
cd "$(dirname "$0")"

# Every binary this build must produce (relative to the build directory).
# tests/lib/xbtest.py (BUILD_OUTPUTS) checks the same list for staleness.
OUTPUTS="erlang-sample erlang-write-perf-map erlang-heapsample xb-gen-release events_only format_bench maps_bench
	tests/unit/test_unit tests/tools/bpf_capture_check tests/tools/xb-format-writer"

need=""
for p in gcc clang libbpf-dev python3 libdw-dev libelf-dev libdebuginfod-dev meson ninja-build pkg-config libprotobuf-c-dev protobuf-c-compiler zlib1g-dev; do
	dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "build.sh: missing packages:$need (run as root to install them)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq $need >/dev/null
fi

dir=build
extra=""
if [ "${XB_SANITIZE:-0}" = 1 ]; then
	dir=build-asan
	# UBSan must abort, or a report would not fail the test that caused it.
	extra="-Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fno-sanitize-recover=all -Dc_link_args=-fno-sanitize-recover=all"
fi
if [ ! -f "$dir/build.ninja" ]; then
	if ! meson setup "$dir" --werror $extra "$@" >"$dir.setup.log" 2>&1; then
		cat "$dir.setup.log" >&2
		echo "build.sh: meson setup $dir failed (log above)" >&2
		exit 1
	fi
	rm -f "$dir.setup.log"
fi
# No pipe: ninja's own exit status decides.  Its progress lines ("[3/40]
# Compiling ...") are dropped from the log shown; errors are kept.
log="$dir/build.sh.log"
if ! ninja -C "$dir" >"$log" 2>&1; then
	grep -v '^\[' "$log" >&2 || true
	echo "build.sh: ninja -C $dir FAILED (full log: $log); the binaries in $dir are not current" >&2
	exit 1
fi
grep -v '^\[' "$log" | grep -v '^ninja: \(Entering\|no work\)' >&2 || true

# Every output exists and is executable, and ninja has nothing left to do
# (its dependency tracking, headers included, is what decides "current").
bad=""
for o in $OUTPUTS; do
	[ -x "$dir/$o" ] || bad="$bad $dir/$o(missing)"
done
# (The dry run's own exit status counts: a ninja -n that fails -- a broken
# build.ninja, a missing rule -- cannot say the build is current.)
dry="$dir/build.sh.dry-run.log"
if ninja -C "$dir" -n >"$dry" 2>&1; then
	left=$(grep '^\[' "$dry" | head -n 3 || true)
	[ -z "$left" ] || bad="$bad (ninja still has work: $left)"
else
	bad="$bad (ninja -n, the staleness check, FAILED: $(grep -v '^\[' "$dry" | tail -n 3 | tr '\n' ' '))"
fi
if [ -n "$bad" ]; then
	echo "build.sh: build of $dir incomplete:$bad" >&2
	exit 1
fi
echo "build.sh: built $(for o in $OUTPUTS; do printf '%s ' "$dir/$o"; done)" >&2
