#!/bin/sh
# build-deb.sh - build a Debian package of the tools:
#   dist/extrospect-beam_VERSION_ARCH.deb
# (erlang-sample, erlang-write-perf-map, erlang-heapsample and their man
# pages, under /usr), depending on Debian's runtime libraries they link
# (elfutils' libdw1, libelf1, libdebuginfod1, libbpf1, libprotobuf-c1,
# zlib1g, libc6: computed by dpkg-shlibdeps).  Install it
# on a machine with no compiler:
#   apt-get install ./dist/extrospect-beam_*.deb
#
# Usage: scripts/build-deb.sh [OUTDIR]      (default: dist/)
# Needs (installed with apt-get when missing, as root): the build
# dependencies of build.sh, dpkg-dev.
set -eu
cd "$(dirname "$0")/.."
out=${1:-dist}

need=""
for p in gcc libdw-dev libelf-dev libdebuginfod-dev meson ninja-build pkg-config dpkg-dev; do
	dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "build-deb.sh: missing packages:$need (run as root to install them)" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq $need >/dev/null
fi

version=$(sed -n "s/^  version : '\([^']*\)',/\1/p" meson.build)
arch=$(dpkg --print-architecture)
[ -n "$version" ] || { echo "build-deb.sh: no version in meson.build" >&2; exit 1; }

# A release build of its own, installed into a staging root.  Without
# --werror (build.sh has it): -O3 warns about more than -O2, and a package
# build should not fail on a newer compiler's new warning.
dir=build-deb
if [ ! -f "$dir/build.ninja" ]; then
	meson setup "$dir" --prefix=/usr --buildtype=release >/dev/null
fi
ninja -C "$dir" erlang-sample erlang-write-perf-map erlang-heapsample >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
meson install -C "$dir" --no-rebuild --destdir "$root" >/dev/null
# Only the tools and their pages (nothing else is installed today, but a
# test program marked for installation must not slip in).
for f in $(find "$root" -type f); do
	case "$f" in
	"$root"/usr/bin/erlang-*|"$root"/usr/share/man/man1/erlang-*.1) ;;
	*) echo "build-deb.sh: unexpected installed file ${f#$root}" >&2; exit 1 ;;
	esac
done
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root"/usr/bin/erlang-*
gzip -9n "$root"/usr/share/man/man1/*.1
doc=$root/usr/share/doc/extrospect-beam
mkdir -p "$doc"
cp LICENSE "$doc/copyright"
gzip -9nc README.md > "$doc/README.md.gz"

# Runtime dependencies, the Debian way.
mkdir -p "$tmp/debian"
printf 'Source: extrospect-beam\n\nPackage: extrospect-beam\nArchitecture: any\n' > "$tmp/debian/control"
deps=$(cd "$tmp" && dpkg-shlibdeps -O root/usr/bin/erlang-* 2>/dev/null |
	sed -n 's/^shlibs:Depends=//p')
[ -n "$deps" ] || { echo "build-deb.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

mkdir -p "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: extrospect-beam
Version: $version
Architecture: $arch
Maintainer: extrospect-beam developers <extrospect-beam@localhost>
Installed-Size: $size
Depends: $deps
Recommends: libstdc++6
Suggests: linux-perf, debuginfod
Section: devel
Priority: optional
Description: look inside a running Erlang VM (BEAM) without stopping it
 erlang-sample samples a running BEAM: which Erlang and native functions burn
 CPU (table, folded stacks, a live top view), one stack per scheduler
 (--pstack), and which Erlang code sits under a native function (--blame).
 erlang-write-perf-map writes /tmp/perf-PID.map for stock perf and names the
 JIT frames in perf script output.  erlang-heapsample shows memory per
 process and per allocator.  Nothing is loaded into the VM.
CONTROL
mkdir -p "$out"
deb=$out/extrospect-beam_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "build-deb.sh: wrote $deb (Depends: $deps)" >&2
