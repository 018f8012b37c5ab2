#!/usr/bin/env bash
# build-vms.sh - build the Erlang VMs our test suite runs against, from Debian's
# OTP source packages.  Idempotent and cached; meant to run as root on a fresh
# Debian 12 machine with no manual steps.
#
#   tests/build-vms.sh default   OTP 25 emu + jit beams with DWARF, installed into
#                                copies of Debian's /usr/lib/erlang, and an OTP 29
#                                slim -g build with its stripped sibling (the
#                                debuginfod test of the default suite):
#                                  otp25-emu-dwarf  otp25-jit-dwarf
#                                  otp29-jit  otp29-jit-stripped
#   tests/build-vms.sh matrix    default + OTP 27 and a stripped sibling of
#                                each of the OTP 25 and 27 builds:
#                                  otp27-jit  <each>-stripped
#
# Environment:
#   EXTROSPECT_VM_CACHE   cache root (default /var/cache/extrospect-beam)
#
# Layout under the cache root:
#   src/    downloaded Debian source packages, extracted trees src/otp-MAJOR/
#           (the builds happen in these trees)
#   vms/    one directory per VM; a VM is complete only when vms/NAME/info exists
#           (written last).  info holds key=value lines: name, otp, otp_version,
#           erts, flavor, debug, beam, erl, source, ...
#   logs/   build output, one file per step
#
# Sources: deb-src entries for bookworm (OTP 25), trixie (27), forky/sid (29) and
# their -security suites go to /etc/apt/sources.list.d/extrospect-beam-src.sources,
# using the mirror URIs of the machine's existing apt configuration.  The newest
# erlang version per OTP major is used (the next lower one if its files are gone).
#
# Build flags follow Debian's debian/rules: CFLAGS="-g -O2 -fno-strict-aliasing",
# GEN_OPT_FLGS read from debian/rules (upstream would use -O3
# -fno-omit-frame-pointer for most erts files), and the configure options in
# DEBIAN_MATCH_OPTS.  With these, the OTP 25 jit build exports exactly the same
# .dynsym (every function and data object the same size) as Debian's stripped
# beam.smp, and sizeof(Process) is 776 as in the stock VM.
#
# To rebuild one VM, delete vms/NAME/info (or the whole directory) and rerun.
# To pick up a newer Debian source version, also delete src/otp-MAJOR.
set -euo pipefail
shopt -s nullglob

CACHE=${EXTROSPECT_VM_CACHE:-/var/cache/extrospect-beam}
SRC=$CACHE/src
VMS=$CACHE/vms
LOGS=$CACHE/logs
JOBS=2
BUILD_CFLAGS="-g -O2 -fno-strict-aliasing"
BUILD_CXXFLAGS="-g -O2"
SOURCES_FILE=/etc/apt/sources.list.d/extrospect-beam-src.sources
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
STOCK_ROOT=/usr/lib/erlang
# Bump when the way VMs are built changes: VMs whose info has another recipe
# are rebuilt on the next run.
RECIPE=2

# sizeof(Process) of Debian's stock OTP 25.2.3 beam.smp (erts 13.1.5): the element
# size of its erts_proc table (see /work/shared/beam-notes.md).  Our DWARF builds
# must agree, or offsets read from their DWARF would be wrong for the stock VM.
OTP25_STOCK_ERTS=13.1.5
OTP25_STOCK_PROCESS_SIZE=776

# Debian configure options that change what goes into beam.smp on linux-amd64
# (from debian/rules of the erlang source packages).  Debian passes no
# --with-dynamic-trace, so USE_VM_PROBES stays off (it would add 16 bytes to
# struct process); we say so explicitly.  Options that are no-ops in these
# releases (--enable-hybrid-heap, --enable-threads, --enable-smp-support,
# --enable-clock-gettime, --enable-ethread-pre-pentium4-compatibility,
# --enable-shared-zlib), only touch epmd (--enable-systemd) or only the crypto
# application (--enable-dynamic-ssl-lib, --with-ssl-rpath=no, --without-ssl-zlib)
# are left out.
DEBIAN_MATCH_OPTS=(
    --enable-kernel-poll        # epoll check-io (also the Linux default)
    --enable-esock              # socket NIF compiled into beam.smp
    --enable-sctp               # SCTP support in inet_drv (needs libsctp-dev headers)
    --disable-builtin-zlib      # link the system zlib instead of the bundled copy
    --without-dynamic-trace     # no dtrace/systemtap/lttng ...
    --disable-vm-probes         # ... and no VM probes (struct process layout)
)
# Slimming: applications we never need.
SLIM_OPTS=(--without-wx --without-javac --without-odbc --without-jinterface --without-ssl)
# Applications kept in full (OTP 27/29) builds; every other lib/* gets --without-APP.
# kernel, stdlib, sasl, compiler and erl_interface are mandatory (configure refuses
# --without-them); parsetools (yecc) is needed to build stdlib; runtime_tools is
# cheap and useful for tests.
KEEP_APPS=(kernel stdlib sasl compiler erl_interface parsetools runtime_tools)

# Build dependencies (Debian package names).
BUILD_DEPS=(build-essential dpkg-dev autoconf perl libncurses-dev zlib1g-dev
            libsctp-dev xz-utils binutils gdb erlang-base util-linux)

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C.UTF-8
unset MAKEFLAGS MFLAGS MAKELEVEL ERL_TOP ERL_LIBS ERL_FLAGS ERL_AFLAGS ERL_ZFLAGS ERL_ROOTDIR || true
: "${HOME:=/root}"
export HOME

# --------------------------------------------------------------------------
# output helpers

ts() { date '+%Y-%m-%d %H:%M:%S'; }
log() { printf '[%s] %s\n' "$(ts)" "$*"; }
warn() { printf '[%s] WARNING: %s\n' "$(ts)" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$(ts)" "$*" >&2; exit 1; }

on_err() {
    local rc=$? line=$1 cmd=$2
    printf '[%s] ERROR: command failed (exit %s) at line %s: %s\n' "$(ts)" "$rc" "$line" "$cmd" >&2
}
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR
set -E

# run LOGNAME CMD...: run CMD with output appended to $LOGS/LOGNAME.log; on
# failure print the log's tail and exit.
run() {
    local logf=$LOGS/$1.log
    shift
    printf '\n### [%s] %s\n' "$(ts)" "$*" >>"$logf"
    if ! "$@" >>"$logf" 2>&1; then
        trap - ERR
        printf '[%s] ERROR: failed: %s\n' "$(ts)" "$*" >&2
        printf '[%s] ---- last 60 lines of %s ----\n' "$(ts)" "$logf" >&2
        tail -n 60 "$logf" | sed 's/^/    /' >&2
        exit 1
    fi
}
# new_log LOGNAME: start a fresh log file for one step (keeping the previous
# one as LOGNAME.prev.log).
new_log() {
    if [[ -s $LOGS/$1.log ]]; then mv -f "$LOGS/$1.log" "$LOGS/$1.prev.log"; fi
    : >"$LOGS/$1.log"
}

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

declare -a TIMINGS=()
STAGE_NAME='' STAGE_START=0
stage_begin() { STAGE_NAME=$1; STAGE_START=$SECONDS; log "==> $1"; }
stage_end() {
    local d=$((SECONDS - STAGE_START))
    TIMINGS+=("$(printf '%-44s %s' "$STAGE_NAME" "$(fmt_secs "$d")")")
    log "<== $STAGE_NAME done in $(fmt_secs "$d")"
}

# --------------------------------------------------------------------------
# apt: build dependencies and deb-src sources

APT_UPDATED=0
apt_update() {
    [[ $APT_UPDATED == 1 ]] && return 0
    log "apt-get update"
    new_log apt-update
    run apt-update apt-get update
    APT_UPDATED=1
}

ensure_build_deps() {
    local p missing=()
    for p in "${BUILD_DEPS[@]}"; do
        if [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true) != installed ]]; then
            missing+=("$p")
        fi
    done
    [[ ${#missing[@]} == 0 ]] && return 0
    log "installing build dependencies: ${missing[*]}"
    new_log apt-install
    if ! apt-get install -y --no-install-recommends "${missing[@]}" >>"$LOGS/apt-install.log" 2>&1; then
        log "apt-get install failed; updating package lists and retrying"
        apt_update
        run apt-install apt-get install -y --no-install-recommends "${missing[@]}"
    fi
}

# Print the URIs of the enabled binary ("deb") sources, in apt's order of
# preference: debian.sources, other *.sources, sources.list, other *.list.
apt_deb_uris() {
    local f files=()
    [[ -f /etc/apt/sources.list.d/debian.sources ]] && files+=(/etc/apt/sources.list.d/debian.sources)
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ $f == /etc/apt/sources.list.d/debian.sources || $f == "$SOURCES_FILE" ]] || files+=("$f")
    done
    for f in "${files[@]}"; do
        # deb822: one stanza per paragraph; keep stanzas whose Types include deb.
        awk 'BEGIN { RS = ""; FS = "\n" }
             {
               types = ""; uris = ""; enabled = "yes"
               for (i = 1; i <= NF; i++) {
                 line = $i
                 if (line ~ /^[ \t]*#/) continue
                 l = tolower(line)
                 if (l ~ /^types:/)   types = substr(line, 7)
                 if (l ~ /^uris:/)    uris = substr(line, 6)
                 if (l ~ /^enabled:/) enabled = tolower(substr(line, 9))
               }
               gsub(/[ \t]/, "", enabled)
               if (enabled != "no" && (" " types " ") ~ /[ \t]deb[ \t]/) {
                 n = split(uris, u, /[ \t]+/)
                 for (j = 1; j <= n; j++) if (u[j] != "") print u[j]
               }
             }' "$f"
    done
    files=()
    [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list; do files+=("$f"); done
    for f in "${files[@]}"; do
        # one-line style: deb [options] URI suite components
        awk '$1 == "deb" {
               i = 2
               if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
               if (i <= NF) print $i
             }' "$f"
    done
}

# URIs, with apt's mirror+file:PATH indirection expanded to the mirrors listed
# in PATH (as on Debian cloud images).
apt_deb_uris_expanded() {
    local u f
    while read -r u; do
        case $u in
            mirror+file:*)
                f=${u#mirror+file:}
                f=/${f#"${f%%[!/]*}"}
                if [[ -r $f ]]; then awk '$1 !~ /^#/ && NF { print $1 }' "$f"; fi ;;
            *) printf '%s\n' "$u" ;;
        esac
    done < <(apt_deb_uris)
}

DEBIAN_URI='' SECURITY_URI=''
derive_mirrors() {
    local u v
    while read -r u; do
        v=${u%/}
        case $v in
            *://*/debian-security) if [[ -z $SECURITY_URI ]]; then SECURITY_URI=$v; fi ;;
            *://*/debian)          if [[ -z $DEBIAN_URI ]]; then DEBIAN_URI=$v; fi ;;
        esac
    done < <(apt_deb_uris_expanded)
    [[ -n $DEBIAN_URI ]] ||
        die "no Debian archive URI (ending in /debian) found in the apt configuration (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list)"
    if [[ -z $SECURITY_URI ]]; then
        SECURITY_URI=${DEBIAN_URI%/debian}/debian-security
        warn "no debian-security URI configured; assuming $SECURITY_URI"
    fi
}

# Add deb-src entries for the suites that carry the OTP versions we build.  Only
# rewrites the file (and runs apt-get update) when its content changes.
ensure_deb_src() {
    derive_mirrors
    local want
    want=$(cat <<EOF
# Written by extrospect-beam tests/build-vms.sh: Debian erlang source packages
# for the VM test matrix (OTP 25: bookworm, 27: trixie, 29: forky/sid).
Types: deb-src
URIs: $DEBIAN_URI
Suites: bookworm bookworm-updates trixie trixie-updates forky sid experimental
Components: main
Signed-By: $KEYRING

Types: deb-src
URIs: $SECURITY_URI
Suites: bookworm-security trixie-security
Components: main
Signed-By: $KEYRING
EOF
)
    if [[ ! -f $SOURCES_FILE || $(cat "$SOURCES_FILE") != "$want" ]]; then
        log "writing $SOURCES_FILE (archive $DEBIAN_URI, security $SECURITY_URI)"
        printf '%s\n' "$want" >"$SOURCES_FILE"
        APT_UPDATED=0
        apt_update
    fi
}

# --------------------------------------------------------------------------
# Debian source packages

# Versions of source package erlang for one OTP major, newest first.
source_versions() {
    local major=$1 v rest=() sorted=() best i
    while read -r v; do
        local u=${v#*:}
        if [[ ${u%%[.~+-]*} == "$major" ]]; then rest+=("$v"); fi
    done < <(apt-cache showsrc erlang 2>/dev/null |
             awk '/^Package:/ { p = $2 } /^Version:/ && p == "erlang" { print $2 }' | sort -u)
    # selection sort with dpkg's version ordering
    while [[ ${#rest[@]} -gt 0 ]]; do
        best=0
        for i in "${!rest[@]}"; do
            if dpkg --compare-versions "${rest[$i]}" gt "${rest[$best]}"; then best=$i; fi
        done
        sorted+=("${rest[$best]}")
        rest=("${rest[@]:0:$best}" "${rest[@]:$((best + 1))}")
    done
    if [[ ${#sorted[@]} -gt 0 ]]; then printf '%s\n' "${sorted[@]}"; fi
}

# ensure_source MAJOR: make $SRC/otp-MAJOR an extracted, Debian-patched source
# tree of the newest downloadable erlang source version of that major.
# Sets SRC_TREE and SRC_VERSION.
ensure_source() {
    local major=$1 tree=$SRC/otp-$1 v versions=() dsc
    SRC_TREE=$tree
    if [[ -f $tree/.extrospect-source ]]; then
        SRC_VERSION=$(cat "$tree/.extrospect-source")
        log "OTP $major source: cached $tree (erlang $SRC_VERSION)"
        return 0
    fi
    stage_begin "OTP $major: fetch + extract Debian source"
    ensure_deb_src
    mapfile -t versions < <(source_versions "$major")
    if [[ ${#versions[@]} == 0 && $APT_UPDATED == 0 ]]; then
        apt_update
        mapfile -t versions < <(source_versions "$major")
    fi
    [[ ${#versions[@]} -gt 0 ]] || die "apt-cache showsrc erlang lists no OTP $major version"
    log "OTP $major: available source versions: ${versions[*]}"
    new_log "otp$major-source"
    SRC_VERSION=
    for v in "${versions[@]}"; do
        log "OTP $major: downloading erlang=$v"
        if (cd "$SRC" && apt-get -o APT::Sandbox::User=root source --download-only "erlang=$v") \
                >>"$LOGS/otp$major-source.log" 2>&1; then
            SRC_VERSION=$v
            break
        fi
        warn "OTP $major: erlang=$v could not be downloaded (see $LOGS/otp$major-source.log); trying the next lower version"
    done
    if [[ -z $SRC_VERSION ]]; then
        # The mirror may serve a source package's upstream tarball but not
        # its .dsc and Debian diff (seen: trixie's 27.3.4.1+dfsg-1+deb13u4,
        # both 404).  That tarball is Debian's own (+dfsg) upstream source:
        # build from it, without Debian's patches (packaging and paths, not
        # the VM's code), rather than not at all.
        for v in "${versions[@]}"; do
            local up=${v#*:}
            up=${up%-*}
            if [[ -f $SRC/erlang_$up.orig.tar.xz ]]; then
                warn "OTP $major: only Debian's upstream tarball erlang_$up.orig.tar.xz could be downloaded (no .dsc/diff on this mirror): building it without Debian's patches"
                SRC_VERSION=$v
                extract_orig "$major" "$v" "$SRC/erlang_$up.orig.tar.xz"
                stage_end
                return 0
            fi
        done
        tail -n 30 "$LOGS/otp$major-source.log" | sed 's/^/    /' >&2
        die "OTP $major: no source version could be downloaded"
    fi
    extract_source "$major" "$SRC_VERSION"
    stage_end
}

# extract_orig MAJOR VERSION TARBALL: $SRC/otp-MAJOR from Debian's upstream
# tarball alone (no debian/ directory: GEN_OPT_FLGS falls back to -O2).
extract_orig() {
    local major=$1 version=$2 orig=$3 tree=$SRC/otp-$1
    rm -rf "$tree" "$tree.tmp"
    mkdir -p "$tree.tmp"
    run "otp$major-source" tar -xf "$orig" -C "$tree.tmp" --strip-components=1
    printf '%s (upstream tarball, no Debian patches)\n' "$version" >"$tree.tmp/.extrospect-source"
    mv "$tree.tmp" "$tree"
}

# extract_source MAJOR VERSION: (re)create $SRC/otp-MAJOR from the downloaded
# source package of VERSION.
extract_source() {
    local major=$1 version=$2 tree=$SRC/otp-$1 dsc
    dsc=$SRC/erlang_${version#*:}.dsc
    [[ -f $dsc ]] || die "expected $dsc after download"
    rm -rf "$tree" "$tree.tmp"
    log "OTP $major: extracting $(basename "$dsc") (dpkg-source -x applies Debian's patches)"
    run "otp$major-source" dpkg-source -x "$dsc" "$tree.tmp"
    printf '%s\n' "$version" >"$tree.tmp/.extrospect-source"
    mv "$tree.tmp" "$tree"
}

# Debian's GEN_OPT_FLGS for this source (debian/rules passes it to make).  It
# replaces the -O2 in CFLAGS for most erts C files; upstream's default is
# "-O3 -fno-omit-frame-pointer", so without it our code (inlining, frame
# pointers in C) would differ from Debian's beam.smp.  $(OPTIMIZATION) is -O2
# on amd64 (-O1 only on armel).
debian_gen_opt_flgs() {
    local tree=$1 raw=
    [[ -f $tree/debian/rules ]] &&
        raw=$(sed -n -E 's/^GEN_OPT_FLGS[[:space:]]*[:+]?=[[:space:]]*//p' "$tree/debian/rules" | tail -n1)
    # shellcheck disable=SC2016  # literal make variable references
    raw=${raw//'$(OPTIMIZATION)'/-O2}
    # shellcheck disable=SC2016
    raw=${raw//'$(SSE2)'/}
    raw=$(printf '%s' "$raw" | tr -s ' ' | sed 's/^ //; s/ $//')
    if [[ -z $raw || $raw == *'$'* ]]; then
        warn "could not read GEN_OPT_FLGS from $tree/debian/rules (got '$raw'); using -O2"
        raw=-O2
    fi
    printf '%s\n' "$raw"
}

# configure_tree MAJOR ARGS...: run ./configure in $SRC/otp-MAJOR unless it was
# already run there with the same arguments and build flags.  A tree configured
# or built with other flags is re-extracted first, so no stale objects survive.
# Sets GEN_OPT (the GEN_OPT_FLGS to pass to make).
configure_tree() {
    local major=$1 tree=$SRC/otp-$1 sig version
    shift
    GEN_OPT=$(debian_gen_opt_flgs "$tree")
    sig="CFLAGS=$BUILD_CFLAGS CXXFLAGS=$BUILD_CXXFLAGS GEN_OPT_FLGS=$GEN_OPT $*"
    if [[ -f $tree/.extrospect-configured ]]; then
        if [[ $(cat "$tree/.extrospect-configured") == "$sig" ]]; then
            log "OTP $major: already configured (GEN_OPT_FLGS=\"$GEN_OPT\")"
            return 0
        fi
        version=$(cat "$tree/.extrospect-source")
        log "OTP $major: build flags changed since the last build; starting from a fresh tree"
        if [[ -f $SRC/erlang_${version#*:}.dsc ]]; then
            extract_source "$major" "$version"
        else
            rm -rf "$tree"
            ensure_source "$major"
        fi
    fi
    log "OTP $major: ./configure $*"
    new_log "otp$major-configure"
    run "otp$major-configure" env -C "$tree" ERL_TOP="$tree" \
        CFLAGS="$BUILD_CFLAGS" CXXFLAGS="$BUILD_CXXFLAGS" ./configure "$@"
    log "OTP $major: make will use GEN_OPT_FLGS=\"$GEN_OPT\" (from debian/rules)"
    printf '%s\n' "$sig" >"$tree/.extrospect-configured"
}

# --------------------------------------------------------------------------
# inspecting binaries and VMs

debug_kind() {   # dwarf | symtab | dynsym
    local secs
    secs=$(readelf -S -W "$1")
    if grep -q '\.debug_info' <<<"$secs"; then echo dwarf
    elif grep -q '\.symtab' <<<"$secs"; then echo symtab
    else echo dynsym
    fi
}

# sizeof(Process) from a binary's DWARF ("" if unavailable).
process_size() {
    local out
    out=$(gdb -batch -nx -iex 'set debuginfod enabled off' -ex 'p sizeof(Process)' "$1" 2>/dev/null || true)
    sed -n 's/^\$[0-9]* = \([0-9]*\)$/\1/p' <<<"$out" | head -n1
}

# Compare the symbols both binaries define in .dynsym (TYPE is OBJECT or FUNC).
# Prints "COMMON SIZE-DIFFERENCES ONLY-IN-ONE".
dynsym_diff() {
    local type=$1 a b
    a=$(readelf --dyn-syms -W "$2" | awk -v t="$type" '$4 == t && $7 != "UND" { print $8, $3 }' | sort -u)
    b=$(readelf --dyn-syms -W "$3" | awk -v t="$type" '$4 == t && $7 != "UND" { print $8, $3 }' | sort -u)
    join -a1 -a2 -e MISSING -o 0,1.2,2.2 <(printf '%s\n' "$a") <(printf '%s\n' "$b") |
        awk '$2 == "MISSING" || $3 == "MISSING" { o++; next } { n++; if ($2 != $3) d++ }
             END { printf "%d %d %d\n", n, d, o }'
}

# boot_check NAME ERL EXPECTED_FLAVOR EXPECTED_BEAM EXPECTED_ROOT
# Starts the VM; checks flavour, which binary runs and the root dir.
# Sets VM_ERTS.
boot_check() {
    local name=$1 erl=$2 flavor=$3 beam=$4 root=$5 out
    local -a lines
    new_log "$name-boot"
    run "$name-boot" timeout 120 "$erl" -noshell -eval \
        'io:format("~s~n",[erlang:system_info(otp_release)]), halt().'
    out=$(timeout 120 "$erl" -noshell -eval '
        {ok, Exe} = file:read_link_all("/proc/self/exe"),
        io:format("~s~n~s~n~s~n~s~n~s~n",
                  [erlang:system_info(otp_release), erlang:system_info(version),
                   erlang:system_info(emu_flavor), Exe, code:root_dir()]),
        halt().' 2>&1) || {
        printf '%s\n' "$out" | sed 's/^/    /' >&2
        die "$name: $erl did not boot"
    }
    printf '%s\n' "$out" >>"$LOGS/$name-boot.log"
    mapfile -t lines <<<"$out"
    [[ ${#lines[@]} -ge 5 ]] || die "$name: unexpected boot output: $out"
    [[ ${lines[2]} == "$flavor" ]] || die "$name: emu_flavor is ${lines[2]}, expected $flavor"
    [[ ${lines[3]} == "$(readlink -f "$beam")" ]] || die "$name: VM runs ${lines[3]}, expected $beam"
    [[ ${lines[4]} == "$root" ]] || die "$name: code:root_dir() is ${lines[4]}, expected $root"
    VM_ERTS=${lines[1]}
    log "$name: boots: otp_release=${lines[0]} erts=${lines[1]} emu_flavor=${lines[2]}"
}

# glob_one PATTERN-EXPANSION...: print the single existing match, else fail.
glob_one() {
    [[ $# == 1 && -e $1 ]] || return 1
    printf '%s\n' "$1"
}

info_get() { sed -n "s/^$2=//p" "$1/info" | head -n1; }

# write_info DIR KEY=VALUE...: write DIR/info atomically (the completion marker).
write_info() {
    local dir=$1
    shift
    printf '%s\n' "$@" "recipe=$RECIPE" >"$dir/info.tmp"
    mv "$dir/info.tmp" "$dir/info"
}

# Point an installed Erlang root at its new location: the root path is baked
# into the bin/erl and bin/start scripts (Debian: ROOTDIR=/usr/lib/erlang; OTP 27:
# ROOTDIR="PREFIX/lib/erlang"; OTP 29: ROOTDIR=$(find_rootdir "$0" "PREFIX/lib/erlang"))
# and into releases/RELEASES.
# fix_rootdir NEW_ROOT OLD_ROOT
fix_rootdir() {
    local root=$1 old=$2 f old_re root_rep
    old_re=$(printf '%s' "$old" | sed 's/[][\\.*^$+?(){}|#]/\\&/g')
    root_rep=$(printf '%s' "$root" | sed 's/[\\&#]/\\&/g')
    for f in "$root"/bin/erl "$root"/bin/start "$root"/erts-*/bin/erl "$root"/erts-*/bin/start; do
        [[ -f $f && ! -L $f ]] || continue
        # the old root as a whole word: followed by a quote, blank or end of line
        sed -i -E "s#${old_re}(\"|[[:space:]]|\$)#${root_rep}\\1#g" "$f"
        if grep -qE "${old_re}(\"|[[:space:]]|\$)" "$f" || ! grep -qF "$root" "$f"; then
            die "could not repoint the root directory in $f from $old to $root"
        fi
    done
    if [[ -f $root/releases/RELEASES ]]; then
        sed -i -E "s#\"${old_re}/#\"${root_rep}/#g" "$root/releases/RELEASES"
    fi
}

# --------------------------------------------------------------------------
# OTP 25: emu and jit beams with DWARF in copies of Debian's erlang-base

OTP25_SOURCE='' OTP25_GEN_OPT=''
otp25_prepare() {
    [[ -n $OTP25_SOURCE ]] && return 0
    ensure_source 25
    OTP25_SOURCE=$SRC_VERSION
    local tree=$SRC_TREE erts_vsn stock_erts inst
    erts_vsn=$(sed -n 's/^VSN[[:space:]]*=[[:space:]]*//p' "$tree/erts/vsn.mk")
    stock_erts=("$STOCK_ROOT"/erts-*)
    [[ ${#stock_erts[@]} == 1 ]] || die "expected one erts-* directory in $STOCK_ROOT (is erlang-base installed?)"
    [[ ${stock_erts[0]##*/erts-} == "$erts_vsn" ]] ||
        die "source erts $erts_vsn does not match installed erlang-base (${stock_erts[0]##*/})"
    inst=$(dpkg-query -W -f='${Version}' erlang-base)
    [[ $inst == "$OTP25_SOURCE" ]] ||
        warn "building from erlang $OTP25_SOURCE but erlang-base $inst is installed (same erts $erts_vsn)"
    stage_begin "OTP 25: configure"
    configure_tree 25 "${SLIM_OPTS[@]}" "${DEBIAN_MATCH_OPTS[@]}"
    OTP25_GEN_OPT=$GEN_OPT
    stage_end
}

build_otp25_vm() {   # FLAVOR (emu|jit)
    local flavor=$1 name=otp25-$1-dwarf dir=$VMS/otp25-$1-dwarf
    local tree beam psize erts_dir stock o_common o_diff o_only f_common f_diff f_only
    otp25_prepare
    tree=$SRC/otp-25
    stage_begin "$name: build beam ($flavor)"
    new_log "$name-make"
    run "$name-make" env ERL_TOP="$tree" make -C "$tree/erts/emulator" -j"$JOBS" \
        FLAVOR="$flavor" GEN_OPT_FLGS="$OTP25_GEN_OPT" opt
    beam=$(glob_one "$tree"/bin/*/beam."$flavor") || die "$name: built binary bin/*/beam.$flavor not found"
    [[ $(debug_kind "$beam") == dwarf ]] || die "$name: $beam has no .debug_info"
    psize=$(process_size "$beam")
    log "$name: sizeof(Process) = ${psize:-?}"
    if [[ $(sed -n 's/^VSN[[:space:]]*=[[:space:]]*//p' "$tree/erts/vsn.mk") == "$OTP25_STOCK_ERTS" ]]; then
        [[ $psize == "$OTP25_STOCK_PROCESS_SIZE" ]] ||
            die "$name: sizeof(Process) is ${psize:-unknown}, Debian's stock beam.smp has $OTP25_STOCK_PROCESS_SIZE"
    else
        warn "$name: erts is not $OTP25_STOCK_ERTS; sizeof(Process)=$psize not checked against the stock VM"
    fi
    stage_end

    stage_begin "$name: install into a copy of $STOCK_ROOT"
    rm -rf "$dir"
    cp -a "$STOCK_ROOT" "$dir"
    fix_rootdir "$dir" "$STOCK_ROOT"
    erts_dir=$(glob_one "$dir"/erts-*) || die "$name: expected one erts-* in $dir"
    install -m 0755 "$beam" "$erts_dir/bin/beam.smp"
    [[ $(debug_kind "$erts_dir/bin/beam.smp") == dwarf ]] || die "$name: installed beam.smp lost .debug_info"
    boot_check "$name" "$dir/bin/erl" "$flavor" "$erts_dir/bin/beam.smp" "$dir"
    # Cross-check against Debian's stripped beam.smp: sizes of the data objects
    # and functions both export.  For the jit flavour (the stock VM is jit) we
    # expect no differences at all; the emu flavour differs by design (Export
    # entries, emulator-loop tables and code).
    stock=$STOCK_ROOT/$(basename "$erts_dir")/bin/beam.smp
    read -r o_common o_diff o_only < <(dynsym_diff OBJECT "$erts_dir/bin/beam.smp" "$stock")
    read -r f_common f_diff f_only < <(dynsym_diff FUNC "$erts_dir/bin/beam.smp" "$stock")
    log "$name: vs stock beam.smp .dynsym: data objects $o_common common / $o_diff size diffs / $o_only in one only;" \
        "functions $f_common / $f_diff / $f_only"
    if [[ $flavor == jit && "$o_diff $o_only $f_diff $f_only" != "0 0 0 0" ]]; then
        warn "$name: exported symbols differ from Debian's beam.smp (objects: $o_diff sizes, $o_only unmatched; functions: $f_diff sizes, $f_only unmatched)"
    fi
    write_info "$dir" \
        "name=$name" \
        "otp=25" \
        "otp_version=$(cat "$dir"/releases/*/OTP_VERSION)" \
        "erts=$VM_ERTS" \
        "flavor=$flavor" \
        "debug=dwarf" \
        "beam=$erts_dir/bin/beam.smp" \
        "erl=$dir/bin/erl" \
        "root=$dir" \
        "source=$OTP25_SOURCE" \
        "process_size=$psize" \
        "gen_opt_flgs=$OTP25_GEN_OPT" \
        "stock_dynsym_objects=$o_common" \
        "stock_dynsym_object_size_diffs=$o_diff" \
        "stock_dynsym_objects_unmatched=$o_only" \
        "stock_dynsym_functions=$f_common" \
        "stock_dynsym_function_size_diffs=$f_diff" \
        "stock_dynsym_functions_unmatched=$f_only" \
        "built=$(ts)"
    stage_end
}

# --------------------------------------------------------------------------
# OTP 27 / 29: slim full builds with -g, make install to the VM dir

build_full_vm() {   # MAJOR
    local major=$1 name=otp$1-jit dir=$VMS/otp$1-jit
    local tree app apps=() without=() root beam psize erts_dir keep k
    ensure_source "$major"
    local source=$SRC_VERSION
    tree=$SRC_TREE
    for app in "$tree"/lib/*/; do
        app=$(basename "$app")
        keep=0
        for k in "${KEEP_APPS[@]}"; do
            if [[ $app == "$k" ]]; then keep=1; fi
        done
        if [[ $keep == 1 ]]; then apps+=("$app"); else without+=("--without-$app"); fi
    done
    stage_begin "$name: configure"
    configure_tree "$major" --prefix="$dir" "${SLIM_OPTS[@]}" "${DEBIAN_MATCH_OPTS[@]}" "${without[@]}"
    stage_end
    stage_begin "$name: make -j$JOBS (apps: erts ${apps[*]})"
    new_log "$name-make"
    run "$name-make" env ERL_TOP="$tree" make -C "$tree" -j"$JOBS" GEN_OPT_FLGS="$GEN_OPT"
    stage_end
    stage_begin "$name: make install"
    rm -rf "$dir"
    new_log "$name-install"
    run "$name-install" env ERL_TOP="$tree" make -C "$tree" GEN_OPT_FLGS="$GEN_OPT" install
    root=$dir/lib/erlang
    erts_dir=$(glob_one "$root"/erts-*) || die "$name: expected one erts-* in $root"
    beam=$erts_dir/bin/beam.smp
    [[ -x $dir/bin/erl && -f $beam ]] || die "$name: make install did not produce bin/erl and $beam"
    [[ $(debug_kind "$beam") == dwarf ]] || die "$name: $beam has no .debug_info"
    psize=$(process_size "$beam")
    log "$name: sizeof(Process) = ${psize:-?}"
    boot_check "$name" "$dir/bin/erl" jit "$beam" "$root"
    write_info "$dir" \
        "name=$name" \
        "otp=$major" \
        "otp_version=$(cat "$root"/releases/*/OTP_VERSION)" \
        "erts=$VM_ERTS" \
        "flavor=jit" \
        "debug=dwarf" \
        "beam=$beam" \
        "erl=$dir/bin/erl" \
        "root=$root" \
        "source=$source" \
        "gen_opt_flgs=$GEN_OPT" \
        "process_size=$psize" \
        "built=$(ts)"
    stage_end
}

# --------------------------------------------------------------------------
# stripped siblings

make_stripped() {   # BASE-NAME
    local base=$1 name=$1-stripped
    local sdir=$VMS/$1 dir=$VMS/$1-stripped
    local oroot root beam erl l t kind
    [[ -f $sdir/info ]] || die "$name: $base is not built"
    stage_begin "$name: copy + strip --strip-all"
    oroot=$(info_get "$sdir" root)
    root=$dir${oroot#"$sdir"}
    beam=$dir$(info_get "$sdir" beam | sed "s#^$sdir##")
    erl=$dir$(info_get "$sdir" erl | sed "s#^$sdir##")
    rm -rf "$dir"
    cp -a "$sdir" "$dir"
    rm -f "$dir/info"
    fix_rootdir "$root" "$oroot"
    # absolute symlinks into the original tree (make install's $prefix/bin)
    while IFS= read -r -d '' l; do
        t=$(readlink "$l")
        if [[ $t == "$sdir"/* ]]; then ln -sfn "$dir${t#"$sdir"}" "$l"; fi
    done < <(find "$dir" -type l -print0)
    strip --strip-all "$beam"
    kind=$(debug_kind "$beam")
    [[ $kind == dynsym ]] || die "$name: $beam still has symbols/DWARF after strip ($kind)"
    boot_check "$name" "$erl" "$(info_get "$sdir" flavor)" "$beam" "$root"
    write_info "$dir" \
        "name=$name" \
        "otp=$(info_get "$sdir" otp)" \
        "otp_version=$(info_get "$sdir" otp_version)" \
        "erts=$VM_ERTS" \
        "flavor=$(info_get "$sdir" flavor)" \
        "debug=$kind" \
        "beam=$beam" \
        "erl=$erl" \
        "root=$root" \
        "source=$(info_get "$sdir" source)" \
        "stripped_from=$base" \
        "stripped_from_built=$(info_get "$sdir" built)" \
        "process_size=$(info_get "$sdir" process_size)" \
        "dynsym_count=$(readelf --dyn-syms -W "$beam" | awk '$1 ~ /^[0-9]+:$/ { n++ } END { print n + 0 }')" \
        "built=$(ts)"
    stage_end
}

# --------------------------------------------------------------------------
# main

usage() {
    echo "usage: $0 default|matrix" >&2
    echo "  default: otp25-emu-dwarf otp25-jit-dwarf otp29-jit otp29-jit-stripped (the debuginfod test)" >&2
    echo "  matrix:  default + otp27-jit otp29-jit and a -stripped copy of each of the four" >&2
    echo "  cache root: \$EXTROSPECT_VM_CACHE (default /var/cache/extrospect-beam)" >&2
    exit 2
}

[[ $# == 1 ]] || usage
MODE=$1
case $MODE in
    # otp29-jit and its stripped copy: the default suite's debuginfod test
    # (test_debuginfod.py) serves the one's DWARF to the tool looking at
    # the other, which names none of its internal functions.
    default) WANT=(otp25-emu-dwarf otp25-jit-dwarf otp29-jit otp29-jit-stripped) ;;
    matrix) WANT=(otp25-emu-dwarf otp25-jit-dwarf otp27-jit otp29-jit
                  otp25-emu-dwarf-stripped otp25-jit-dwarf-stripped
                  otp27-jit-stripped otp29-jit-stripped) ;;
    *) usage ;;
esac

# A VM is done when its info file exists (and names an existing erl and beam).
# A stripped copy is also out of date when its base VM was rebuilt since.
vm_done() {
    local d=$VMS/$1 base
    [[ -f $d/info && -x $(info_get "$d" erl) && -f $(info_get "$d" beam) ]] || return 1
    [[ $(info_get "$d" recipe) == "$RECIPE" ]] || return 1
    if [[ $1 == *-stripped ]]; then
        base=$VMS/${1%-stripped}
        [[ -f $base/info && $(info_get "$base" built) == "$(info_get "$d" stripped_from_built)" ]] || return 1
    fi
    return 0
}

missing_vms() {
    local vm
    todo=()
    for vm in "${WANT[@]}"; do
        if ! vm_done "$vm"; then todo+=("$vm"); fi
    done
}

# Fast path (no lock, no writes, works for non-root users): everything built.
missing_vms
if [[ ${#todo[@]} == 0 ]]; then
    log "all ${#WANT[@]} $MODE VMs present in $VMS: ${WANT[*]}"
    exit 0
fi
[[ $(id -u) == 0 ]] || die "building needs root (apt-get, $SOURCES_FILE); missing VMs: ${todo[*]}"

mkdir -p "$SRC" "$VMS" "$LOGS"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
    log "another build-vms.sh holds $CACHE/.lock; waiting"
    flock 9
    missing_vms
    if [[ ${#todo[@]} == 0 ]]; then
        log "all ${#WANT[@]} $MODE VMs present in $VMS: ${WANT[*]}"
        exit 0
    fi
fi
log "building ${#todo[@]} VM(s) into $VMS: ${todo[*]}"
T0=$SECONDS

stage_begin "build dependencies"
ensure_build_deps
stage_end

for vm in "${todo[@]}"; do
    if vm_done "$vm"; then continue; fi   # built as a dependency of an earlier entry
    case $vm in
        otp25-emu-dwarf) build_otp25_vm emu ;;
        otp25-jit-dwarf) build_otp25_vm jit ;;
        otp27-jit) build_full_vm 27 ;;
        otp29-jit) build_full_vm 29 ;;
        *-stripped)
            base=${vm%-stripped}
            vm_done "$base" || die "$vm: base VM $base missing"
            make_stripped "$base" ;;
    esac
done

log "timings:"
for t in "${TIMINGS[@]}"; do log "  $t"; done
log "total $(fmt_secs $((SECONDS - T0)))"
for vm in "${WANT[@]}"; do
    log "$vm: $(info_get "$VMS/$vm" erl) ($(info_get "$VMS/$vm" otp_version), $(info_get "$VMS/$vm" flavor), $(info_get "$VMS/$vm" debug))"
done
