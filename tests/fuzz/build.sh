#!/bin/sh
# tests/fuzz/build.sh - build the libFuzzer targets into build-fuzz/ with
# Debian's clang (libFuzzer, ASan, UBSan; every source instrumented for
# coverage).  Prints the build directory.
#   tests/fuzz/build.sh && build-fuzz/tests/fuzz/fuzz_text tests/fuzz/corpus/text
set -eu
cd "$(dirname "$0")/../.."
dir=build-fuzz
if ! command -v clang >/dev/null 2>&1; then
	echo "tests/fuzz/build.sh: clang is not installed (apt-get install clang)" >&2
	exit 1
fi
if [ ! -f "$dir/build.ninja" ]; then
	CC=clang meson setup "$dir" -Dfuzz=true -Dbuildtype=debugoptimized \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" >/dev/null
fi
# No pipe: ninja's own exit status decides (a compile error must fail this
# script, not leave the previous fuzzers in place).  Progress lines dropped.
log="$dir/fuzz-build.log"
if ! ninja -C "$dir" tests/fuzz/fuzz_symfile tests/fuzz/fuzz_records tests/fuzz/fuzz_terms \
	tests/fuzz/fuzz_text tests/fuzz/fuzz_dwarf tests/fuzz/fuzz_heap tests/fuzz/fuzz_layout tests/fuzz/fuzz_maps >"$log" 2>&1; then
	grep -v '^\[' "$log" >&2 || true
	echo "tests/fuzz/build.sh: ninja -C $dir FAILED (full log: $log)" >&2
	exit 1
fi
echo "$dir"
