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
#                                and, for the tests that name them (struct
#                                layouts no release table has):
#                                  sid-stock          Debian sid's own erlang-base in a
#                                                     debootstrapped root, run as a
#                                                     container (~1 min)
#                                  otp25-emu-shifted  otp25-jit-shifted
#                                                     members inserted into struct
#                                                     process and ErtsSchedulerData_,
#                                                     erts 13.1.5.77
#                                  otp25-jit-probes   --enable-vm-probes (USE_VM_PROBES:
#                                                     struct process +16), erts 13.1.5
#                                  <each of these three>-stripped
#   tests/build-vms.sh matrix    default + OTP 27 and a stripped sibling of
#                                each of the OTP 25 and 27 builds, the other
#                                suites' own VMs and the OTP 27 shifted and
#                                probes builds:
#                                  otp27-jit  <each>-stripped
#                                  trixie-stock  bookworm-stock
#                                  otp27-jit-shifted (erts 15.2.7.77)  + -stripped
#                                  otp27-jit-probes (erts 15.2.7)  + -stripped
#                                and otpX.Y.Z-jit for every other erlang release
#                                apt-cache showsrc lists whose source can be
#                                downloaded (the release tables: scripts/gen-release-table)
#
# Environment:
#   EXTROSPECT_VM_CACHE   cache root (default /var/cache/extrospect-beam)
#
# Layout under the cache root:
#   src/    downloaded Debian source packages, extracted trees src/otp-ID/
#           (the builds happen in these trees; ID: see ensure_source)
#   vms/    one directory per VM; a VM is complete only when vms/NAME/info exists
#           (written last).  info holds key=value lines: name, otp, otp_version,
#           erts, flavor, debug, beam, erl, root, source, src_tree (the tree it
#           was built in), ...; a container VM (NAME-stock) also chroot= (its
#           root; beam, erl and root are host paths inside it); a shifted or
#           probes build variant=, unshifted= (the VM of the same release
#           without the change), shifted= or probes= (the members inserted:
#           struct.member:bytes:after|before:member ...) and moved= (how far
#           the members the tools read moved, from both builds' DWARF)
#   roots/  the debootstrapped roots of the NAME-stock VMs
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
ROOTS=$CACHE/roots
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
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
            libsctp-dev xz-utils binutils gdb erlang-base util-linux
            debootstrap        # the *-stock roots (Debian's own VMs, as containers)
            systemtap-sdt-dev) # sys/sdt.h and dtrace: the VM-probes builds

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
# Debian source packages and source trees
#
# A tree ID names one source tree, $SRC/otp-ID:
#   MAJOR           (25, 27, 29): the newest downloadable erlang source of that
#                   OTP major (the otpMAJOR-* VMs are built in these trees)
#   X.Y.Z           (29.1.1): that upstream release, the newest Debian revision
#                   of it (the release-table VMs otpX.Y.Z-jit)
#   MAJOR-VARIANT   (25-shifted, 25-probes, 27-shifted): a separate tree of the
#                   same source version as MAJOR's, changed for the variant
#                   (tree_patch; configure options: see the variant's builder).
#                   MAJOR's own tree is never touched.

# "1:29.1.1+dfsg-1" -> "29.1.1" (no epoch, no Debian revision, no +dfsg/~ suffix)
upstream_plain() {
    local u=${1#*:}
    u=${u%-*}
    printf '%s\n' "${u%%[+~]*}"
}

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

# Candidate Debian versions for tree ID MAJOR or X.Y.Z, newest first.
id_versions() {
    local id=$1 v
    if [[ $id == *.* ]]; then
        while read -r v; do
            if [[ $(upstream_plain "$v") == "$id" ]]; then printf '%s\n' "$v"; fi
        done < <(source_versions "${id%%.*}")
    else
        source_versions "$id"
    fi
}

# ensure_source ID: make $SRC/otp-ID an extracted (for Debian's packages:
# Debian-patched) source tree; see "tree ID" above.  Sets SRC_TREE and
# SRC_VERSION (the Debian version, possibly followed by a note).
ensure_source() {
    local id=$1 tree=$SRC/otp-$1 v versions=() base_version
    SRC_TREE=$tree
    if [[ -f $tree/.extrospect-source ]]; then
        SRC_VERSION=$(cat "$tree/.extrospect-source")
        log "OTP $id source: cached $tree (erlang $SRC_VERSION)"
        return 0
    fi
    if [[ $id == *-* ]]; then
        # a variant: the same source version as its major's tree
        ensure_source "${id%%-*}"
        base_version=${SRC_VERSION%% *}
        stage_begin "OTP $id: a separate source tree of erlang $base_version"
        new_log "otp$id-source"
        extract_version "$id" "$base_version"
        SRC_TREE=$tree
        SRC_VERSION=$(cat "$tree/.extrospect-source")
        stage_end
        return 0
    fi
    stage_begin "OTP $id: fetch + extract Debian source"
    ensure_deb_src
    mapfile -t versions < <(id_versions "$id")
    if [[ ${#versions[@]} == 0 && $APT_UPDATED == 0 ]]; then
        apt_update
        mapfile -t versions < <(id_versions "$id")
    fi
    [[ ${#versions[@]} -gt 0 ]] || die "apt-cache showsrc erlang lists no version for OTP $id"
    log "OTP $id: available source versions: ${versions[*]}"
    new_log "otp$id-source"
    SRC_VERSION=
    for v in "${versions[@]}"; do
        log "OTP $id: downloading erlang=$v"
        if (cd "$SRC" && apt-get -o APT::Sandbox::User=root source --download-only "erlang=$v") \
                >>"$LOGS/otp$id-source.log" 2>&1; then
            SRC_VERSION=$v
            break
        fi
        warn "OTP $id: erlang=$v could not be downloaded (see $LOGS/otp$id-source.log); trying the next lower version"
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
                warn "OTP $id: only Debian's upstream tarball erlang_$up.orig.tar.xz could be downloaded (no .dsc/diff on this mirror): building it without Debian's patches"
                SRC_VERSION=$v
                break
            fi
        done
        if [[ -z $SRC_VERSION ]]; then
            tail -n 30 "$LOGS/otp$id-source.log" | sed 's/^/    /' >&2
            die "OTP $id: no source version could be downloaded"
        fi
    fi
    extract_version "$id" "$SRC_VERSION"
    SRC_VERSION=$(cat "$tree/.extrospect-source")
    stage_end
}

# extract_version ID VERSION: (re)create $SRC/otp-ID from the downloaded
# source package of VERSION (dpkg-source -x: Debian's patches applied), or,
# when only Debian's upstream tarball is there, from that tarball alone (no
# debian/ directory: GEN_OPT_FLGS falls back to -O2); then the variant's
# changes (tree_patch).
extract_version() {
    local id=$1 version=$2 tree=$SRC/otp-$1 dsc up orig note=
    dsc=$SRC/erlang_${version#*:}.dsc
    up=${version#*:}
    up=${up%-*}
    orig=$SRC/erlang_$up.orig.tar.xz
    rm -rf "$tree" "$tree.tmp"
    if [[ -f $dsc ]]; then
        log "OTP $id: extracting $(basename "$dsc") (dpkg-source -x applies Debian's patches)"
        run "otp$id-source" dpkg-source -x "$dsc" "$tree.tmp"
    elif [[ -f $orig ]]; then
        log "OTP $id: extracting $(basename "$orig") (no Debian patches)"
        mkdir -p "$tree.tmp"
        run "otp$id-source" tar -xf "$orig" -C "$tree.tmp" --strip-components=1
        note=" (upstream tarball, no Debian patches)"
    else
        die "OTP $id: neither $dsc nor $orig is in $SRC (delete $SRC/otp-${id%%-*} to download again)"
    fi
    tree_patch "$id" "$tree.tmp"
    printf '%s%s\n' "$version" "$note" >"$tree.tmp/.extrospect-source"
    mv "$tree.tmp" "$tree"
}

# tree_patch ID DIR: the variant's changes to a freshly extracted tree.
tree_patch() {
    case $1 in
        *-shifted) patch_shifted "$1" "$2" ;;
        *) ;;
    esac
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

# configure_tree ID ARGS...: run ./configure in $SRC/otp-ID unless it was
# already run there with the same arguments and build flags.  A tree configured
# or built with other flags is re-extracted first, so no stale objects survive.
# Sets GEN_OPT (the GEN_OPT_FLGS to pass to make).
configure_tree() {
    local id=$1 tree=$SRC/otp-$1 sig
    shift
    GEN_OPT=$(debian_gen_opt_flgs "$tree")
    sig="CFLAGS=$BUILD_CFLAGS CXXFLAGS=$BUILD_CXXFLAGS GEN_OPT_FLGS=$GEN_OPT $*"
    if [[ -f $tree/.extrospect-configured ]]; then
        if [[ $(cat "$tree/.extrospect-configured") == "$sig" ]]; then
            log "OTP $id: already configured (GEN_OPT_FLGS=\"$GEN_OPT\")"
            return 0
        fi
        log "OTP $id: build flags changed since the last build; starting from a fresh tree"
        new_log "otp$id-source"
        extract_version "$id" "$(cut -d' ' -f1 "$tree/.extrospect-source")"
    fi
    log "OTP $id: ./configure $*"
    new_log "otp$id-configure"
    run "otp$id-configure" env -C "$tree" ERL_TOP="$tree" \
        CFLAGS="$BUILD_CFLAGS" CXXFLAGS="$BUILD_CXXFLAGS" ./configure "$@"
    log "OTP $id: make will use GEN_OPT_FLGS=\"$GEN_OPT\" (from debian/rules)"
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

# gdb_values BINARY EXPR...: the value of each C expression (cast to long),
# evaluated with BINARY's DWARF, one line each ("" where gdb cannot, e.g. a
# member the struct does not have).
gdb_values() {
    local bin=$1 e args=()
    shift
    for e in "$@"; do
        args+=(-ex 'echo XB-VALUE\040' -ex "output (long)($e)" -ex 'echo \n')
    done
    gdb -batch -nx -iex 'set debuginfod enabled off' "${args[@]}" "$bin" 2>/dev/null |
        sed -n 's/^XB-VALUE //p'
}

# The members whose offsets the layout checks compare (erl_process.h's
# struct process and struct ErtsSchedulerData_, fields the tools read).
LAYOUT_PROCESS=(htop stop fcalls freason fvalue heap hend i reds flags u current)
LAYOUT_SCHED=(registers current_process type no)

# layout_moves BEAM BASE_BEAM: sets LAYOUT_MOVED ("process.heap:+24 ...": how
# far each LAYOUT_* member moved from BASE_BEAM's layout to BEAM's, both
# read from DWARF), LAYOUT_SIZE and LAYOUT_BASE_SIZE (sizeof(struct process)).
layout_moves() {
    local beam=$1 base=$2 m exprs=() a=() b=() i n labels=()
    for m in "${LAYOUT_PROCESS[@]}"; do
        exprs+=("&((struct process *)0)->$m"); labels+=("process.$m")
    done
    for m in "${LAYOUT_SCHED[@]}"; do
        exprs+=("&((struct ErtsSchedulerData_ *)0)->$m"); labels+=("ErtsSchedulerData_.$m")
    done
    exprs+=("sizeof(struct process)")
    mapfile -t a < <(gdb_values "$beam" "${exprs[@]}")
    mapfile -t b < <(gdb_values "$base" "${exprs[@]}")
    n=${#exprs[@]}
    [[ ${#a[@]} == "$n" && ${#b[@]} == "$n" ]] ||
        die "could not read struct layouts from the DWARF of $beam and $base (gdb)"
    LAYOUT_MOVED=
    for ((i = 0; i < n - 1; i++)); do
        [[ -n ${a[$i]} && -n ${b[$i]} ]] || die "no ${labels[$i]} in the DWARF of $beam or $base"
        LAYOUT_MOVED+="${LAYOUT_MOVED:+ }${labels[$i]}:$(printf '%+d' $((a[i] - b[i])))"
    done
    LAYOUT_SIZE=${a[$((n - 1))]} LAYOUT_BASE_SIZE=${b[$((n - 1))]}
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
        "src_tree=$tree" \
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
# OTP 27 / 29 and the release-table VMs: slim full builds with -g, make install
# to the VM dir

# Configure options of a full build in tree ID (the apps not in KEEP_APPS
# left out); sets FULL_OPTS and FULL_APPS.
full_build_opts() {
    local tree=$SRC/otp-$1 app keep k
    FULL_OPTS=("${SLIM_OPTS[@]}" "${DEBIAN_MATCH_OPTS[@]}") FULL_APPS=()
    for app in "$tree"/lib/*/; do
        app=$(basename "$app")
        keep=0
        for k in "${KEEP_APPS[@]}"; do
            if [[ $app == "$k" ]]; then keep=1; fi
        done
        if [[ $keep == 1 ]]; then FULL_APPS+=("$app"); else FULL_OPTS+=("--without-$app"); fi
    done
}

UNAVAILABLE=()
build_full_vm() {   # ID: a major (27, 29: otp27-jit) or an upstream release (29.1.1: otp29.1.1-jit)
    local id=$1 name=otp$1-jit dir=$VMS/otp$1-jit
    local tree root beam psize erts_dir
    if [[ $id == *.* && ! -f $SRC/otp-$id/.extrospect-source ]]; then
        # A release apt lists may not be downloadable (seen: sid's
        # 29.1.2+dfsg-1, every file 404 on this mirror): say so and go on
        # with the other VMs.
        if ! (ensure_source "$id"); then
            warn "$name: no source of erlang $id could be downloaded; $name is not built"
            UNAVAILABLE+=("$name")
            # not tried again for a day while apt lists the same versions of it
            mkdir -p "$dir"
            id_versions "$id" >"$dir/unavailable"
            return 0
        fi
    fi
    ensure_source "$id"
    local source=$SRC_VERSION
    tree=$SRC_TREE
    full_build_opts "$id"
    stage_begin "$name: configure"
    configure_tree "$id" --prefix="$dir" "${FULL_OPTS[@]}"
    stage_end
    stage_begin "$name: make -j$JOBS (apps: erts ${FULL_APPS[*]})"
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
        "otp=${id%%.*}" \
        "otp_version=$(cat "$root"/releases/*/OTP_VERSION)" \
        "erts=$VM_ERTS" \
        "flavor=jit" \
        "debug=dwarf" \
        "beam=$beam" \
        "erl=$dir/bin/erl" \
        "root=$root" \
        "source=$source" \
        "src_tree=$tree" \
        "gen_opt_flgs=$GEN_OPT" \
        "process_size=$psize" \
        "built=$(ts)"
    stage_end
}

# Upstream releases Debian ships (apt-cache showsrc erlang: 25, 27, 29) that
# no otpMAJOR-* VM is built from: each gets a VM otpX.Y.Z-jit, so that
# scripts/gen-release-table has a DWARF build of every release.  Versions
# move: a release that is no longer downloadable is not listed.
extra_release_ids() {
    local major main v up seen=" "
    for major in 25 27 29; do
        if [[ -f $SRC/otp-$major/.extrospect-source ]]; then
            main=$(upstream_plain "$(cut -d' ' -f1 "$SRC/otp-$major/.extrospect-source")")
        else
            main=$(upstream_plain "$(source_versions "$major" | head -n1)")
        fi
        while read -r v; do
            [[ -n $v ]] || continue
            up=$(upstream_plain "$v")
            if [[ $up != "$main" && $seen != *" $up "* ]]; then
                seen+="$up "
                printf '%s\n' "$up"
            fi
        done < <(source_versions "$major")
    done
}

# --------------------------------------------------------------------------
# copies of installed VMs

# copy_install SRC DEST: DEST becomes a copy of an installed OTP, its root
# directory pointed at the copy.  SRC is $STOCK_ROOT (Debian's) or a VM dir
# of ours (its info names root and erl).  Sets COPY_ROOT and COPY_ERL.
copy_install() {
    local src=$1 dest=$2 oroot l t
    rm -rf "$dest"
    if [[ $src == "$STOCK_ROOT" ]]; then
        cp -a "$STOCK_ROOT" "$dest"
        fix_rootdir "$dest" "$STOCK_ROOT"
        COPY_ROOT=$dest COPY_ERL=$dest/bin/erl
        return 0
    fi
    oroot=$(info_get "$src" root)
    COPY_ROOT=$dest${oroot#"$src"}
    COPY_ERL=$dest$(info_get "$src" erl | sed "s#^$src##")
    cp -a "$src" "$dest"
    rm -f "$dest/info"
    fix_rootdir "$COPY_ROOT" "$oroot"
    # absolute symlinks into the original tree (make install's $prefix/bin)
    while IFS= read -r -d '' l; do
        t=$(readlink "$l")
        if [[ $t == "$src"/* ]]; then ln -sfn "$dest${t#"$src"}" "$l"; fi
    done < <(find "$dest" -type l -print0)
}

# rename_erts ROOT OLD NEW: the installed OTP in ROOT runs erts NEW: its
# erts-OLD directory renamed and every reference to it (the bin/ scripts,
# symlinks, releases/RELEASES, start_erl.data, the .rel files) changed.
rename_erts() {
    local root=$1 old=$2 new=$3 f t left
    [[ -d $root/erts-$old && ! -e $root/erts-$new ]] || die "rename_erts: no $root/erts-$old (or erts-$new exists)"
    mv "$root/erts-$old" "$root/erts-$new"
    while IFS= read -r f; do
        OLD=$old NEW=$new perl -pi -e 's/erts-\Q$ENV{OLD}\E(?![0-9]|\.[0-9])/erts-$ENV{NEW}/g' "$f"
    done < <(grep -rIlF -- "erts-$old" "$root/bin" "$root/erts-$new/bin" "$root/releases" 2>/dev/null || true)
    while IFS= read -r -d '' f; do
        t=$(readlink "$f")
        if [[ $t == *erts-$old/* ]]; then ln -sfn "${t//erts-$old\//erts-$new/}" "$f"; fi
    done < <(find "$root" -type l -print0)
    for f in "$root"/releases/RELEASES "$root"/releases/start_erl.data "$root"/releases/*/*.rel; do
        [[ -f $f ]] || continue
        OLD=$old NEW=$new perl -pi -e '
            s/(\{erts,\s*")\Q$ENV{OLD}\E(")/$1$ENV{NEW}$2/g;
            s/(\{release,"[^"]*","[^"]*",")\Q$ENV{OLD}\E(")/$1$ENV{NEW}$2/g;
            s/^\Q$ENV{OLD}\E(\s)/$ENV{NEW}$1/ if $ARGV =~ m{/start_erl\.data$};' "$f"
    done
    left=$(grep -rIlE -- "erts-${old//./\\.}([^.0-9]|\$)" "$root/bin" "$root/erts-$new/bin" "$root/releases" 2>/dev/null || true)
    [[ -z $left ]] || die "rename_erts: erts-$old still named in: $left"
}

# --------------------------------------------------------------------------
# Layout-shifted and VM-probes builds: stand-ins for releases, and for
# distribution builds, whose struct layouts no release table has.
#
#   otp25-emu-shifted  otp25-jit-shifted  otp27-jit-shifted   (tree MAJOR-shifted)
#       erts/emulator/beam/erl_process.h with members inserted (patch_shifted)
#       and erts/vsn.mk's VSN set to a version no table names (the release's +
#       SHIFT_VSN_SUFFIX); the beam alone is built (make -C erts/emulator) and
#       installed into a copy of the same release's install, its erts-X
#       directory renamed.
#   otp25-jit-probes  otp27-jit-probes                        (tree MAJOR-probes)
#       configured --with-dynamic-trace=systemtap --enable-vm-probes (as some
#       distributions do): USE_VM_PROBES adds dt_utag and dt_utag_flags to
#       struct process (erl_process.h; PROBES_AT), 16 bytes, while the erts
#       version stays the release's.
# Each keeps its DWARF (the answer key for discovery); make_stripped makes the
# -stripped sibling (.dynsym only, as Debian ships beam.smp).  The info file
# names the VM whose layout this one shifts (unshifted=), the members
# inserted (shifted=, probes=) and how far the members the tools read moved
# (moved=, from both builds' DWARF).

SHIFT_A=24 SHIFT_B=40 SHIFT_C=40
SHIFT_VSN_SUFFIX=.77

# Where USE_VM_PROBES puts dt_utag and dt_utag_flags in struct process
# (erts/emulator/beam/erl_process.h): OTP 25 before u (u.initial, current
# and what follows move by 16), OTP 27 at the end, after run_queue (only
# sizeof(Process), the process table's element size, changes).
declare -A PROBES_AT=([25]=before:u [27]=after:run_queue)

# patch_shifted ID DIR: the inserted members.  struct process: SHIFT_A bytes
# early (the interpreter: right after stop; the JIT: after the members
# erts/emulator/beam/jit/beam_jit_main.cpp asserts are below offset 128,
# where the "End of frequently used fields by BEAMASM code" comment is) and
# SHIFT_B bytes after reds; struct ErtsSchedulerData_: SHIFT_C bytes before
# current_process.  Different runs of members thus move by 0, SHIFT_A and
# SHIFT_A + SHIFT_B.
patch_shifted() {
    local id=$1 dir=$2 h=$2/erts/emulator/beam/erl_process.h vsn
    XB_A=$SHIFT_A XB_B=$SHIFT_B XB_C=$SHIFT_C perl -e '
        my ($f, $a, $b, $c) = ($ARGV[0], @ENV{qw(XB_A XB_B XB_C)});
        my $note = "/* extrospect-beam layout-shifted test build */";
        open(my $in, "<", $f) or die "$f: $!\n";
        my $s = do { local $/; <$in> };
        close($in);
        sub once { my ($re, $what) = @_;
                   my $n = () = $s =~ /$re/mg;
                   die "erl_process.h: $n matches for $what (expected 1)\n" if $n != 1; }
        once(qr/^\s*Eterm \*stop;/m, "Eterm *stop;");
        once(qr/^\s*\/\* End of frequently used fields by BEAMASM code\. \*\//m, "the end of the BEAMASM fields");
        once(qr/^\s*Uint reds;/m, "Uint reds;");
        once(qr/^\s*Process \*current_process;/m, "Process *current_process;");
        $s =~ s{^(\s*Eterm \*stop;[^\n]*\n)}{$1#ifndef BEAMASM\n    char xb_shift_a[$a]; $note\n#endif\n}m;
        $s =~ s{^(\s*/\* End of frequently used fields by BEAMASM code\. \*/)}{#ifdef BEAMASM\n    char xb_shift_a[$a]; $note\n#endif\n$1}m;
        $s =~ s{^(\s*Uint reds;[^\n]*\n)}{$1    char xb_shift_b[$b]; $note\n}m;
        $s =~ s{^(\s*Process \*current_process;)}{    char xb_shift_c[$c]; $note\n$1}m;
        open(my $out, ">", "$f.tmp") or die "$f.tmp: $!\n";
        print $out $s;
        close($out) or die "$f.tmp: $!\n";
        rename("$f.tmp", $f) or die "$f: $!\n";' "$h" || die "OTP $id: patching $h failed"
    vsn=$(sed -n 's/^VSN[[:space:]]*=[[:space:]]*//p' "$dir/erts/vsn.mk")
    [[ -n $vsn ]] || die "OTP $id: no VSN in erts/vsn.mk"
    [[ ! -e $REPO/src/beam/releases/erts-$vsn$SHIFT_VSN_SUFFIX.c ]] ||
        die "OTP $id: a release table for erts $vsn$SHIFT_VSN_SUFFIX exists; pick another SHIFT_VSN_SUFFIX"
    sed -i -E "s/^(VSN[[:space:]]*=[[:space:]]*).*/\\1$vsn$SHIFT_VSN_SUFFIX/" "$dir/erts/vsn.mk"
    log "OTP $id: erl_process.h: struct process +$SHIFT_A (xb_shift_a) +$SHIFT_B (xb_shift_b after reds)," \
        "ErtsSchedulerData_ +$SHIFT_C (xb_shift_c before current_process); VSN $vsn -> $vsn$SHIFT_VSN_SUFFIX"
}

# The member xb_shift_a follows in struct process (see patch_shifted).
shift_a_after() {   # MAJOR FLAVOR
    case $1:$2 in
        *:emu) echo stop ;;
        25:jit) echo fvalue ;;   # OTP 25: htop stop frame_pointer fcalls freason fvalue
        27:jit) echo flags ;;    # OTP 27: htop stop frame_pointer freason fvalue fcalls flags
        *) die "no xb_shift_a position known for OTP $1 $2" ;;
    esac
}

# build_variant MAJOR FLAVOR VARIANT: otpMAJOR-FLAVOR-VARIANT (shifted|probes),
# from tree MAJOR-VARIANT, into a copy of the install of the unshifted VM of the
# same release (OTP 25: Debian's /usr/lib/erlang, the otp25-FLAVOR-dwarf beam's
# home; else otpMAJOR-jit's).
build_variant() {
    local major=$1 flavor=$2 variant=$3 name=otp$1-$2-$3 dir=$VMS/otp$1-$2-$3 id=$1-$3
    local base tree source opts=() o beam base_beam erts_dir old_vsn new_vsn copy_from a_after
    local extra=() exprs=() vals=()
    if [[ $major == 25 ]]; then base=otp25-$flavor-dwarf copy_from=$STOCK_ROOT
    else base=otp$major-$flavor copy_from=$VMS/otp$major-$flavor
    fi
    if ! vm_done "$base"; then
        if [[ $major == 25 ]]; then build_otp25_vm "$flavor"; else build_full_vm "$major"; fi
    fi
    base_beam=$(info_get "$VMS/$base" beam)
    ensure_source "$id"
    source=$SRC_VERSION tree=$SRC_TREE
    if [[ $major == 25 ]]; then
        opts=("${SLIM_OPTS[@]}" "${DEBIAN_MATCH_OPTS[@]}")
    else
        full_build_opts "$id"
        opts=(--prefix="$dir" "${FULL_OPTS[@]}")
    fi
    if [[ $variant == probes ]]; then
        local o2=()
        for o in "${opts[@]}"; do
            case $o in --without-dynamic-trace | --disable-vm-probes) ;; *) o2+=("$o") ;; esac
        done
        opts=("${o2[@]}" --with-dynamic-trace=systemtap --enable-vm-probes)
    fi
    stage_begin "OTP $id: configure"
    configure_tree "$id" "${opts[@]}"
    stage_end

    stage_begin "$name: build beam ($flavor)"
    new_log "$name-make"
    run "$name-make" env ERL_TOP="$tree" make -C "$tree/erts/emulator" -j"$JOBS" \
        FLAVOR="$flavor" GEN_OPT_FLGS="$GEN_OPT" opt
    beam=$(glob_one "$tree"/bin/*/beam."$flavor") || die "$name: built binary bin/*/beam.$flavor not found"
    [[ $(debug_kind "$beam") == dwarf ]] || die "$name: $beam has no .debug_info"
    layout_moves "$beam" "$base_beam"
    log "$name: sizeof(Process) $LAYOUT_SIZE ($base: $LAYOUT_BASE_SIZE); moved: $LAYOUT_MOVED"
    if [[ $variant == shifted ]]; then
        # the answer key must be what patch_shifted meant: check it in the DWARF
        a_after=$(shift_a_after "$major" "$flavor")
        mapfile -t vals < <(gdb_values "$beam" \
            "&((struct process *)0)->xb_shift_a" \
            "(char *)&((struct process *)0)->$a_after + sizeof(((struct process *)0)->$a_after)" \
            "&((struct process *)0)->xb_shift_b" \
            "(char *)&((struct process *)0)->reds + sizeof(((struct process *)0)->reds)" \
            "(char *)&((struct ErtsSchedulerData_ *)0)->xb_shift_c + $SHIFT_C" \
            "&((struct ErtsSchedulerData_ *)0)->current_process")
        [[ ${#vals[@]} == 6 && -n ${vals[0]} && ${vals[0]} == "${vals[1]}" && -n ${vals[2]} &&
           ${vals[2]} == "${vals[3]}" && -n ${vals[4]} && ${vals[4]} == "${vals[5]}" ]] ||
            die "$name: the inserted members are not where patch_shifted put them (DWARF: ${vals[*]})"
        [[ $((LAYOUT_SIZE - LAYOUT_BASE_SIZE)) == $((SHIFT_A + SHIFT_B)) ]] ||
            die "$name: sizeof(struct process) grew by $((LAYOUT_SIZE - LAYOUT_BASE_SIZE)), expected $((SHIFT_A + SHIFT_B))"
        extra=("shifted=process.xb_shift_a:$SHIFT_A:after:$a_after process.xb_shift_b:$SHIFT_B:after:reds ErtsSchedulerData_.xb_shift_c:$SHIFT_C:before:current_process")
    else
        # where erl_process.h puts dt_utag and dt_utag_flags (USE_VM_PROBES)
        local where=${PROBES_AT[$major]:-} anchor_expr
        [[ -n $where ]] || die "$name: where USE_VM_PROBES puts dt_utag in OTP $major is not known (PROBES_AT)"
        if [[ $where == before:* ]]; then
            anchor_expr="&((struct process *)0)->${where#before:}"
        else
            anchor_expr="(char *)&((struct process *)0)->${where#after:} + sizeof(((struct process *)0)->${where#after:})"
        fi
        mapfile -t vals < <(gdb_values "$beam" \
            "&((struct process *)0)->dt_utag" \
            "(char *)&((struct process *)0)->dt_utag + 8" \
            "&((struct process *)0)->dt_utag_flags" \
            "(char *)&((struct process *)0)->dt_utag_flags + sizeof(((struct process *)0)->dt_utag_flags)" \
            "$anchor_expr")
        if [[ $where == before:* ]]; then
            [[ ${#vals[@]} == 5 && -n ${vals[0]} && ${vals[1]} == "${vals[2]}" && ${vals[3]} == "${vals[4]}" ]] ||
                die "$name: no dt_utag, dt_utag_flags right before ${where#before:} in the DWARF (${vals[*]})"
        else
            [[ ${#vals[@]} == 5 && -n ${vals[0]} && ${vals[1]} == "${vals[2]}" && ${vals[0]} == "${vals[4]}" ]] ||
                die "$name: no dt_utag, dt_utag_flags right after ${where#after:} in the DWARF (${vals[*]})"
        fi
        [[ $((LAYOUT_SIZE - LAYOUT_BASE_SIZE)) == 16 ]] ||
            die "$name: sizeof(struct process) grew by $((LAYOUT_SIZE - LAYOUT_BASE_SIZE)), expected 16 (USE_VM_PROBES)"
        readelf -S -W "$beam" | grep -q '\.note\.stapsdt' || die "$name: no .note.stapsdt section (systemtap probes)"
        if [[ $where == before:* ]]; then
            extra=("probes=process.dt_utag:8:before:dt_utag_flags process.dt_utag_flags:8:$where (USE_VM_PROBES)")
        else
            extra=("probes=process.dt_utag:8:$where process.dt_utag_flags:8:after:dt_utag (USE_VM_PROBES)")
        fi
    fi
    stage_end

    stage_begin "$name: install into a copy of $copy_from"
    copy_install "$copy_from" "$dir"
    erts_dir=$(glob_one "$COPY_ROOT"/erts-*) || die "$name: expected one erts-* in $COPY_ROOT"
    old_vsn=${erts_dir##*/erts-}
    new_vsn=$(sed -n 's/^VSN[[:space:]]*=[[:space:]]*//p' "$tree/erts/vsn.mk")
    if [[ $new_vsn != "$old_vsn" ]]; then
        rename_erts "$COPY_ROOT" "$old_vsn" "$new_vsn"
        erts_dir=$COPY_ROOT/erts-$new_vsn
    fi
    install -m 0755 "$beam" "$erts_dir/bin/beam.smp"
    boot_check "$name" "$COPY_ERL" "$flavor" "$erts_dir/bin/beam.smp" "$COPY_ROOT"
    [[ $VM_ERTS == "$new_vsn" ]] || die "$name: the VM says erts $VM_ERTS, the tree's VSN is $new_vsn"
    write_info "$dir" \
        "name=$name" \
        "otp=$major" \
        "otp_version=$(cat "$COPY_ROOT"/releases/*/OTP_VERSION)" \
        "erts=$VM_ERTS" \
        "flavor=$flavor" \
        "debug=dwarf" \
        "beam=$erts_dir/bin/beam.smp" \
        "erl=$COPY_ERL" \
        "root=$COPY_ROOT" \
        "source=$source" \
        "src_tree=$tree" \
        "gen_opt_flgs=$GEN_OPT" \
        "variant=$variant" \
        "unshifted=$base" \
        "unshifted_erts=$old_vsn" \
        "${extra[@]}" \
        "moved=$LAYOUT_MOVED" \
        "process_size=$LAYOUT_SIZE" \
        "unshifted_process_size=$LAYOUT_BASE_SIZE" \
        "built=$(ts)"
    stage_end
}

# --------------------------------------------------------------------------
# stripped siblings

make_stripped() {   # BASE-NAME
    local base=$1 name=$1-stripped
    local sdir=$VMS/$1 dir=$VMS/$1-stripped
    local beam kind k v extra=()
    [[ -f $sdir/info ]] || die "$name: $base is not built"
    stage_begin "$name: copy + strip --strip-all"
    beam=$dir$(info_get "$sdir" beam | sed "s#^$sdir##")
    copy_install "$sdir" "$dir"
    strip --strip-all "$beam"
    kind=$(debug_kind "$beam")
    [[ $kind == dynsym ]] || die "$name: $beam still has symbols/DWARF after strip ($kind)"
    boot_check "$name" "$COPY_ERL" "$(info_get "$sdir" flavor)" "$beam" "$COPY_ROOT"
    # what a variant's info says about its layout holds for its stripped copy
    for k in variant unshifted unshifted_erts shifted probes moved unshifted_process_size src_tree; do
        v=$(info_get "$sdir" "$k")
        if [[ -n $v ]]; then extra+=("$k=$v"); fi
    done
    write_info "$dir" \
        "name=$name" \
        "otp=$(info_get "$sdir" otp)" \
        "otp_version=$(info_get "$sdir" otp_version)" \
        "erts=$VM_ERTS" \
        "flavor=$(info_get "$sdir" flavor)" \
        "debug=$kind" \
        "beam=$beam" \
        "erl=$COPY_ERL" \
        "root=$COPY_ROOT" \
        "source=$(info_get "$sdir" source)" \
        "stripped_from=$base" \
        "stripped_from_built=$(info_get "$sdir" built)" \
        "process_size=$(info_get "$sdir" process_size)" \
        "${extra[@]}" \
        "dynsym_count=$(readelf --dyn-syms -W "$beam" | awk '$1 ~ /^[0-9]+:$/ { n++ } END { print n + 0 }')" \
        "built=$(ts)"
    stage_end
}

# --------------------------------------------------------------------------
# Debian's own stripped VMs as users run them: a debootstrapped root per
# suite (sid-stock, trixie-stock, bookworm-stock), $ROOTS/SUITE.
#
# The test harness (tests/lib/xbtest.py) starts such a root's /usr/bin/erl in
# new mount and PID namespaces, chrooted into it (as a container runtime
# would), and points the tools at the beam's host pid.  The info file's paths
# (beam, erl, root) are host paths inside the root; chroot= is the root.

# umount_under DIR: unmount whatever is mounted at or below DIR (debootstrap
# mounts /proc and /sys in its target and may leave them on failure).
umount_under() {
    local m
    while read -r m; do
        umount -l "$m" || true
    done < <(findmnt -rn -o TARGET | awk -v d="$1" '$0 == d || index($0, d "/") == 1' | sort -r)
}

# container_run ROOT CMD...: CMD chrooted into ROOT, in new mount and PID
# namespaces, /proc of the new PID namespace mounted inside.
container_run() {
    local root=$1
    shift
    unshare --mount --pid --fork --kill-child --mount-proc="$root/proc" -- chroot "$root" "$@"
}

build_container() {   # SUITE
    local suite=$1 name=$1-stock dir=$VMS/$1-stock root=$ROOTS/$1
    local erts_dir beam kind out pkg
    local -a lines
    derive_mirrors
    stage_begin "$name: debootstrap --variant=minbase --include=erlang-base,procps $suite"
    mkdir -p "$ROOTS"
    umount_under "$root.tmp"
    umount_under "$root"
    rm -rf "$dir" "$root" "$root.tmp"
    new_log "$name-debootstrap"
    run "$name-debootstrap" debootstrap --variant=minbase --include=erlang-base,procps \
        "$suite" "$root.tmp" "$DEBIAN_URI"
    umount_under "$root.tmp"
    mv "$root.tmp" "$root"
    erts_dir=$(glob_one "$root"/usr/lib/erlang/erts-*) || die "$name: expected one erts-* in $root/usr/lib/erlang"
    beam=$erts_dir/bin/beam.smp
    [[ -x $root/usr/bin/erl && -f $beam ]] || die "$name: no /usr/bin/erl or $beam in $root"
    kind=$(debug_kind "$beam")
    pkg=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version}' erlang-base)
    new_log "$name-boot"
    out=$(timeout 120 unshare --mount --pid --fork --kill-child --mount-proc="$root/proc" -- \
            chroot "$root" /usr/bin/erl -noshell -eval '
        {ok, Exe} = file:read_link_all("/proc/self/exe"),
        io:format("~s~n~s~n~s~n~s~n~s~n~s~n",
                  [erlang:system_info(otp_release), erlang:system_info(version),
                   erlang:system_info(emu_flavor), Exe, code:root_dir(), os:getpid()]),
        halt().' 2>&1) || {
        printf '%s\n' "$out" | sed 's/^/    /' >&2
        die "$name: /usr/bin/erl did not boot in $root"
    }
    printf '%s\n' "$out" >>"$LOGS/$name-boot.log"
    mapfile -t lines <<<"$out"
    [[ ${#lines[@]} -ge 6 ]] || die "$name: unexpected boot output: $out"
    [[ ${lines[3]} == "${beam#"$root"}" ]] || die "$name: VM runs ${lines[3]}, expected ${beam#"$root"}"
    [[ ${lines[4]} == /usr/lib/erlang ]] || die "$name: code:root_dir() is ${lines[4]}"
    [[ ${lines[5]} == 1 ]] || die "$name: the VM is pid ${lines[5]} in its PID namespace, expected 1"
    log "$name: erlang-base $pkg boots in its root: otp_release=${lines[0]} erts=${lines[1]}" \
        "emu_flavor=${lines[2]}, beam.smp ($kind) pid 1 of its namespace"
    mkdir -p "$dir"
    write_info "$dir" \
        "name=$name" \
        "otp=${lines[0]}" \
        "otp_version=$(cat "$root"/usr/lib/erlang/releases/*/OTP_VERSION)" \
        "erts=${lines[1]}" \
        "flavor=${lines[2]}" \
        "debug=$kind" \
        "beam=$beam" \
        "erl=$root/usr/bin/erl" \
        "root=$root/usr/lib/erlang" \
        "chroot=$root" \
        "suite=$suite" \
        "source=erlang-base $pkg ($suite, $DEBIAN_URI)" \
        "dynsym_count=$(readelf --dyn-syms -W "$beam" | awk '$1 ~ /^[0-9]+:$/ { n++ } END { print n + 0 }')" \
        "built=$(ts)"
    stage_end
}

# --------------------------------------------------------------------------
# main

DEFAULT_WANT=(otp25-emu-dwarf otp25-jit-dwarf otp29-jit otp29-jit-stripped
              sid-stock
              otp25-emu-shifted otp25-jit-shifted otp25-jit-probes
              otp25-emu-shifted-stripped otp25-jit-shifted-stripped otp25-jit-probes-stripped)
MATRIX_WANT=("${DEFAULT_WANT[@]}" otp27-jit
             otp25-emu-dwarf-stripped otp25-jit-dwarf-stripped otp27-jit-stripped
             trixie-stock bookworm-stock
             otp27-jit-shifted otp27-jit-shifted-stripped
             otp27-jit-probes otp27-jit-probes-stripped)

usage() {
    echo "usage: $0 default|matrix" >&2
    echo "  default: ${DEFAULT_WANT[*]}" >&2
    echo "  matrix:  default + ${MATRIX_WANT[*]:${#DEFAULT_WANT[@]}}" >&2
    echo "           + otpX.Y.Z-jit for every other erlang release Debian ships (release tables)" >&2
    echo "  cache root: \$EXTROSPECT_VM_CACHE (default /var/cache/extrospect-beam)" >&2
    exit 2
}

[[ $# == 1 ]] || usage
MODE=$1
case $MODE in
    # otp29-jit and its stripped copy: the default suite's debuginfod test
    # (test_debuginfod.py) serves the one's DWARF to the tool looking at
    # the other, which names none of its internal functions.  sid-stock,
    # the shifted and the probes builds: tests that name them (discovery of
    # struct layouts no table has; tests/acceptance/test_targets.py).
    default) WANT=("${DEFAULT_WANT[@]}") ;;
    matrix)
        WANT=("${MATRIX_WANT[@]}")
        # the release-table VMs: which releases Debian ships is apt's answer
        if [[ $(id -u) == 0 ]]; then
            mkdir -p "$SRC" "$VMS" "$LOGS"
            ensure_deb_src >/dev/null
        fi
        while read -r rel; do
            if [[ -n $rel ]]; then WANT+=("otp$rel-jit"); fi
        done < <(extra_release_ids)
        ;;
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

# A release VM (otpX.Y.Z-jit) whose source could not be downloaded is not
# tried again for a day while apt-cache lists the same versions of that
# release (delete vms/NAME/unavailable to try at once).
unavailable() {
    local id=${1#otp} f=$VMS/$1/unavailable
    [[ $1 == otp*.*-jit && -f $f && -n $(find "$f" -mmin -1440) ]] &&
        [[ $(cat "$f") == "$(id_versions "${id%-jit}")" ]]
}

missing_vms() {
    local vm
    todo=() skipped=() present=()
    for vm in "${WANT[@]}"; do
        if vm_done "$vm"; then present+=("$vm"); continue; fi
        if unavailable "$vm"; then skipped+=("$vm"); else todo+=("$vm"); fi
    done
}

# Fast path (no lock, no writes, works for non-root users): everything built.
missing_vms
if [[ ${#skipped[@]} -gt 0 ]]; then
    log "not built, their source could not be downloaded: ${skipped[*]} ($VMS/NAME/unavailable)"
fi
if [[ ${#todo[@]} == 0 ]]; then
    log "all ${#present[@]} $MODE VMs present in $VMS: ${present[*]}"
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
        log "all ${#present[@]} $MODE VMs present in $VMS: ${present[*]}"
        exit 0
    fi
fi
log "building ${#todo[@]} VM(s) into $VMS: ${todo[*]}"
T0=$SECONDS

stage_begin "build dependencies"
ensure_build_deps
stage_end

build_vm() {   # NAME
    local vm=$1 base m
    case $vm in
        *-stripped)
            base=${vm%-stripped}
            vm_done "$base" || build_vm "$base"
            make_stripped "$base" ;;
        otp25-emu-dwarf) build_otp25_vm emu ;;
        otp25-jit-dwarf) build_otp25_vm jit ;;
        *-stock) build_container "${vm%-stock}" ;;
        otp[0-9]*-jit-shifted | otp[0-9]*-emu-shifted | otp[0-9]*-jit-probes)
            m=${vm#otp}
            build_variant "${m%%-*}" "$(cut -d- -f2 <<<"$m")" "${m##*-}" ;;
        otp[0-9]*-jit)
            m=${vm#otp}
            build_full_vm "${m%-jit}" ;;
        *) die "no recipe for a VM named $vm" ;;
    esac
}

for vm in "${todo[@]}"; do
    if vm_done "$vm"; then continue; fi   # built as a dependency of an earlier entry
    build_vm "$vm"
done

log "timings:"
for t in "${TIMINGS[@]}"; do log "  $t"; done
log "total $(fmt_secs $((SECONDS - T0)))"
for vm in "${WANT[@]}"; do
    if [[ -f $VMS/$vm/info ]]; then
        log "$vm: $(info_get "$VMS/$vm" erl) ($(info_get "$VMS/$vm" otp_version), erts $(info_get "$VMS/$vm" erts), $(info_get "$VMS/$vm" flavor), $(info_get "$VMS/$vm" debug))"
    else
        log "$vm: not built (its source could not be downloaded)"
    fi
done
