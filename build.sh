#!/bin/sh
# build.sh - install build dependencies (Debian packages) and build.
# Usage: ./build.sh [meson setup options...]
#   XB_SANITIZE=1 ./build.sh   builds with ASan/UBSan into build-asan/
set -eu
cd "$(dirname "$0")"

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
	meson setup "$dir" --werror $extra "$@" >/dev/null
fi
ninja -C "$dir" | grep -v "^\[" || true
test -x "$dir/erlang-write-perf-map"
echo "build.sh: built $dir/erlang-sample $dir/erlang-write-perf-map" >&2
