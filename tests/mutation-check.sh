#!/usr/bin/env bash
# tests/mutation-check.sh - does the suite fail when the tool is broken?
#
# In a scratch copy of this tree (its own build directory; the VM cache is
# shared, read-only), break the tool in one way at a time, rebuild, and run a
# fast subset of the suite chosen to be sensitive to that breakage.  The
# check passes only if
#   - the unbroken copy builds and passes every subset (else a failing subset
#     would "catch" anything), and
#   - every mutation makes its subset fail (pytest's exit status non-zero
#     with a failed test or the conftest's refusal of a stale build, or the
#     build refuse the change).
# Mutations (applied with sed to stable anchors of the C sources; the files
# are found by grepping src/, so a file moving does not matter.  A pattern
# that no longer matches exactly the expected number of lines stops the
# script with "MUTATION DOES NOT APPLY": update the pattern, never skip it):
#   compile-error   '#error' appended to the file with erlang-sample's main();
#                   build.sh must fail, and the suite must refuse the stale
#                   binaries the failed build left behind
#   no-samples      erlang-sample's per-sample profile update made a no-op:
#                   the tool runs and prints "processed N/M" but no rows
#   neighbour       xb_codemap_find returns the entry before the one that
#                   contains the address: every Erlang frame is named after
#                   its neighbour
#   exit0-bad-input the tools' usage / bad-value exits (return 2) return 0
#   exit0-heapsample the same in erlang-heapsample alone (its own tests
#                   must catch it, not erlang-sample's)
#
# Each mutation starts from the unbroken sources: the files the previous one
# changed are copied back with a new modification time, so that ninja
# rebuilds their objects (ninja rebuilds only when an input is newer than
# its output: a copy that kept the old time, as cp -a does, left the
# previous mutation's objects in place and mutations stacked).  Checked on
# every run: after each restore, ninja must have the restored files'
# objects to rebuild, and at the end the restored tree, rebuilt, must give
# the unbroken binaries byte for byte.
#
# Usage: tests/mutation-check.sh [MUTATION...]   (default: all)
# Environment: XB_MUTATION_KEEP=1 keeps the scratch directory.
# Exit status 0 when every mutation was caught.  Takes about 3 minutes (191 s
# on the shared 2-CPU machine at load ~10: one full build of the copy, one
# subset per mutation on the unbroken copy, then one incremental build and
# one subset per mutation, one more incremental build at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

all=(compile-error no-samples neighbour exit0-bad-input exit0-heapsample)
want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=("${all[@]}")

scratch=$(mktemp -d /tmp/xb-mutation.XXXXXX)
if [[ ${XB_MUTATION_KEEP:-0} != 1 ]]; then
    trap 'rm -rf "$scratch"' EXIT
else
    echo "mutation-check: scratch directory $scratch (kept)"
fi
tree=$scratch/tree
mkdir -p "$tree"
# The working tree as it is (tracked and new files, not ignored ones: no
# build directories), so that uncommitted test changes are checked too.
git ls-files -z -c -o --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$tree"

say() { echo "mutation-check: $*"; }
die() { echo "mutation-check: $*" >&2; exit 1; }

# Subsets: pytest arguments (into the array subset_args), fast, each
# sensitive to its mutation.  Returns 1 for an unknown mutation.
subset() {
    case $1 in
        compile-error)   subset_args=(--vm stock -k test_bad_input) ;;
        no-samples)      subset_args=(--vm stock -k "test_known_split or test_interrupt_prints_results") ;;
        neighbour)       subset_args=(--vm stock -k "test_deep_pstack or test_pstack_frames_at_their_addresses") ;;
        exit0-bad-input) subset_args=(--vm stock -k "test_bad_input or test_perfmap_non_numeric_pid") ;;
        exit0-heapsample) subset_args=(--vm stock tests/acceptance/test_heapsample.py -k test_bad_input) ;;
        *) return 1 ;;
    esac
}

# apply_sed FILE EXPECTED_CHANGED_LINES SED_SCRIPT: apply, and fail loudly
# unless exactly that many lines changed.
apply_sed() {
    local file=$1 expect=$2 script=$3
    [[ -f $file ]] || die "MUTATION DOES NOT APPLY: $file does not exist"
    cp "$file" "$file.orig"
    sed -i -e "$script" "$file"
    local changed
    changed=$(diff "$file.orig" "$file" | grep -c '^>' || true)
    rm -f "$file.orig"
    if [[ $changed -ne $expect ]]; then
        die "MUTATION DOES NOT APPLY: sed '$script' changed $changed line(s) of ${file#$tree/}, expected $expect: update tests/mutation-check.sh"
    fi
}

# find_src REGEX: the one file under src/ with a line matching REGEX.
find_src() {
    local files
    files=$(grep -rlE "$1" "$tree/src" --include='*.c' || true)
    [[ -n $files && $(wc -l <<<"$files") -eq 1 ]] ||
        die "MUTATION DOES NOT APPLY: expected exactly one file under src/ matching /$1/, found: ${files:-none}"
    echo "$files"
}

mutate() {
    local f
    case $1 in
        compile-error)
            f=$(find "$tree/src" -name erlang-sample.c)
            [[ -n $f && $(wc -l <<<"$f") -eq 1 ]] && grep -q '^int main' "$f" ||
                die "MUTATION DOES NOT APPLY: no single src/**/erlang-sample.c with main()"
            echo '#error "xb mutation: compile error"' >>"$f" ;;
        no-samples)
            # The one call that adds a resolved sample to the profile
            # (erlang-sample.c's on_sample before the session layout,
            # session.c's since): &c->prof or &s->prof.
            f=$(find_src '^[[:space:]]*xb_profile_add\(&[a-z]+->prof, ')
            apply_sed "$f" 1 's/^\([[:space:]]*\)xb_profile_add(&\([a-z]*\)->prof, /\1if (0) xb_profile_add(\&\2->prof, /' ;;
        neighbour)
            f=$(find_src '^const struct xb_code \*xb_codemap_find\(')
            apply_sed "$f" 1 '/^const struct xb_code \*xb_codemap_find(/,/^}/ s/return &cm->v\[mid\];/return mid ? \&cm->v[mid - 1] : \&cm->v[mid];/' ;;
        exit0-bad-input | exit0-heapsample)
            local n tools=(erlang-sample erlang-write-perf-map)
            [[ $1 == exit0-heapsample ]] && tools=(erlang-heapsample)
            for tool in "${tools[@]}"; do
                f=$(find "$tree/src" -name "$tool.c")
                [[ -n $f && $(wc -l <<<"$f") -eq 1 ]] ||
                    die "MUTATION DOES NOT APPLY: no single src/**/$tool.c"
                n=$(grep -c '^[[:space:]]*return 2;' "$f" || true)
                [[ $n -ge 3 ]] || die "MUTATION DOES NOT APPLY: only $n 'return 2;' in ${f#$tree/}"
                apply_sed "$f" "$n" 's/^\([[:space:]]*\)return 2;/\1return 0;/'
            done ;;
        *) die "unknown mutation $1 (known: ${all[*]})" ;;
    esac
}

run_subset() {  # NAME: pytest's exit status; output in $scratch/NAME.log
    subset "$1"
    (cd "$tree" && timeout 900 /usr/bin/python3 -m pytest -v --strict-suite "${subset_args[@]}") \
        >"$scratch/$1.log" 2>&1
}

t0=$(date +%s)
say "building the unbroken copy in $tree/build"
(cd "$tree" && ./build.sh) >"$scratch/build-base.log" 2>&1 ||
    { cat "$scratch/build-base.log" >&2; die "the unbroken copy does not build"; }
pristine=$scratch/pristine
cp -a "$tree/src" "$pristine"
# The unbroken binaries, to compare the restored tree's against at the end.
binaries() { (cd "$tree/build" && sha256sum erlang-sample erlang-write-perf-map erlang-heapsample); }
binaries >"$scratch/binaries.pristine"

# restore_src: every file of src/ the last mutation changed gets its
# unbroken content back with a new modification time (see the header),
# and ninja must then have its object to rebuild.
restore_src() {
    local f rel restored=() missing
    while IFS= read -r -d '' f; do
        rel=${f#"$pristine"/}
        if ! cmp -s "$f" "$tree/src/$rel"; then
            cp "$f" "$tree/src/$rel"
            touch "$tree/src/$rel"
            restored+=("$rel")
        fi
    done < <(find "$pristine" -type f -print0)
    [[ ${#restored[@]} -gt 0 ]] || return 0
    (cd "$tree" && ninja -C build -n -d explain) >"$scratch/restore.explain" 2>&1 || true
    for rel in "${restored[@]}"; do
        [[ $rel == *.c ]] || continue
        grep -q "src/$rel" "$scratch/restore.explain" ||
            die "restoring src/$rel: ninja does not rebuild it (ninja -n -d explain in $scratch/restore.explain): the next mutation would run on this one's objects"
    done
    say "restored ${restored[*]} (ninja will rebuild them)"
}

# Baseline: every subset passes unbroken.
for m in "${want[@]}"; do
    subset "$m" || die "unknown mutation $m (known: ${all[*]})"
    # One second run when the first fails: the suite proper runs these
    # tests too and reports each failure there; here a failure only says
    # the subset cannot witness its mutation, and one flake of a
    # statistical test must not count twice.  Both failing is fatal.
    if ! run_subset "$m"; then
        first=$(grep -m 1 -E '^(FAILED|ERROR) ' "$scratch/$m.log" || tail -n 1 "$scratch/$m.log")
        say "baseline: the subset for $m failed once (${first:0:300}): running it again"
        if ! run_subset "$m"; then
            tail -n 30 "$scratch/$m.log" >&2
            die "baseline: the subset for '$m' (${subset_args[*]}) FAILS twice on the unbroken tool: it cannot show that the mutation is caught"
        fi
    fi
    say "baseline: subset for $m passes ($(tail -n 1 "$scratch/$m.log"))"
done

failed=0
for m in "${want[@]}"; do
    restore_src
    mutate "$m"
    if (cd "$tree" && ./build.sh) >"$scratch/build-$m.log" 2>&1; then
        built=yes
    else
        built=no
    fi
    if [[ $m == compile-error && $built == yes ]]; then
        say "NOT CAUGHT: $m: build.sh exited 0 on a compile error"
        failed=1
        continue
    fi
    if [[ $m != compile-error && $built == no ]]; then
        tail -n 20 "$scratch/build-$m.log" >&2
        die "the mutation $m does not compile: fix the sed pattern, it must break the tool, not the build"
    fi
    rc=0
    run_subset "$m" || rc=$?
    summary=$(tail -n 1 "$scratch/$m.log")
    if [[ $rc -ne 0 ]] && grep -qE '^(FAILED |ERROR |.*conftest: )' "$scratch/$m.log"; then
        first=$(grep -m1 -E '^(FAILED |ERROR |.*conftest: )' "$scratch/$m.log")
        say "caught: $m (build $built; pytest exit $rc: $summary) -- ${first:0:200}"
    else
        say "NOT CAUGHT: $m: pytest exit $rc ($summary); log:"
        sed 's/^/    /' "$scratch/$m.log" | tail -n 40
        failed=1
    fi
done
# The restored tree rebuilt gives the unbroken binaries: nothing of any
# mutation is left in the objects (what each mutation started from).
restore_src
(cd "$tree" && ./build.sh) >"$scratch/build-restored.log" 2>&1 ||
    { cat "$scratch/build-restored.log" >&2; die "the restored copy does not build"; }
binaries >"$scratch/binaries.restored"
if ! cmp -s "$scratch/binaries.pristine" "$scratch/binaries.restored"; then
    diff "$scratch/binaries.pristine" "$scratch/binaries.restored" >&2 || true
    die "the restored tree does not rebuild the unbroken binaries: a mutation stayed in the build"
fi
say "restored tree rebuilt: the unbroken binaries, byte for byte"
say "done in $(( $(date +%s) - t0 )) s: $([[ $failed == 0 ]] && echo "every mutation was caught" || echo "SOME MUTATIONS WERE NOT CAUGHT")"
exit $failed
