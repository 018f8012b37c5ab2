"""erlang-write-perf-map acceptance tests.

a. JIT: --no-fold reproduces the VM's own +JPperf map; the default (folded)
   output equals the VM's map with each X-CodeInfoPrologue folded into X.
b. Interpreter: every function of every loaded module has exactly one entry,
   entries do not overlap, and each function's first instruction (ground
   truth: erts_debug:disassemble/1) lies inside its entry.
d. Safe writing of /tmp/perf-PID.map (mode, symlinks, foreign owner, a VM
   that writes the file itself, stdout).
e. --watch follows code loading and stops cleanly.
f. EXTROSPECT_RANGES_BY_REFS=1 yields the identical map.
(c, bad input, is in test_badinput.py.)
"""

import collections
import errno
import os
import signal
import stat
import time

from xbtest import (asan, VM, check, log, per_vm, read_perf_map, run_cmd, run_tool, skip_because, spawn_tool,
                    timeout, tmpdir, wait_file_stable, wait_for, parse_perf_map)

TOOL = "erlang-write-perf-map"
PROLOGUE = "-CodeInfoPrologue"


def ok_run(r, what="erlang-write-perf-map"):
    check(r.rc == 0 and not r.timed_out, "%s failed (exit %s)" % (what, r.rc), r.describe())
    return r


def default_map_path(pid):
    return "/tmp/perf-%d.map" % pid


def remove_quietly(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def fold_prologues(entries):
    """The VM's map (file order) with each 'X-CodeInfoPrologue' entry merged
    into the directly following entry if that is X and starts where the
    prologue ends."""
    out, i = [], 0
    while i < len(entries):
        s, z, n = entries[i]
        if n.endswith(PROLOGUE) and i + 1 < len(entries):
            s2, z2, n2 = entries[i + 1]
            if n2 == n[:-len(PROLOGUE)] and s2 == s + z:
                out.append((s, z + z2, n2))
                i += 2
                continue
        out.append((s, z, n))
        i += 1
    return out


def fmt(e):
    return "%x %x %s" % e


def compare_maps(expected, ours, label):
    """Fraction of expected entries found exactly in ours, and extras."""
    ours_set = set(ours)
    exp_set = set(expected)
    missing = [e for e in expected if e not in ours_set]
    extra = [e for e in ours if e not in exp_set]
    matched = len(expected) - len(missing)
    ratio = matched / len(expected) if expected else 0.0
    log("%s: %d of %d VM entries reproduced exactly (%.3f%%), %d of our %d entries not in "
        "the VM's map" % (label, matched, len(expected), 100 * ratio, len(extra), len(ours)))
    detail = ""
    if missing:
        detail += "first missing (VM entry not in ours):\n  " + "\n  ".join(
            fmt(e) for e in missing[:10]) + "\n"
        by_name = {}
        for e in ours:
            by_name.setdefault(e[2], []).append(e)
        near = ["%s -> ours: %s" % (fmt(e), ", ".join(fmt(o) for o in by_name.get(e[2], [])[:3])
                                    or "(no entry with that name)") for e in missing[:5]]
        detail += "same names in ours:\n  " + "\n  ".join(near) + "\n"
    if extra:
        detail += "first extra (ours, not in VM's map):\n  " + "\n  ".join(
            fmt(e) for e in extra[:10]) + "\n"
    return ratio, missing, extra, detail


def snapshot_vm_and_ours(vm, ours_path, *tool_args):
    """Wait until the VM's own perf map is quiet, write ours, and re-read the
    VM's map; retry if the VM appended to its map meanwhile."""
    vmmap = default_map_path(vm.pid)
    for attempt in range(3):
        check(wait_file_stable(vmmap, quiet=0.5, timeout=20),
              "the VM's own map %s did not appear or kept growing" % vmmap)
        before = os.stat(vmmap).st_size
        ok_run(run_tool(TOOL, *tool_args, "-o", ours_path, vm.pid, timeout=30))
        if os.stat(vmmap).st_size == before:
            return read_perf_map(vmmap), read_perf_map(ours_path)
    raise AssertionError("the VM kept appending to %s" % vmmap)


# --------------------------------------------------------------------------
# a. JIT: compare with the VM's own +JPperf map

@per_vm(flavor="jit")
def test_nofold_reproduces_vm_perf_map(target):
    with VM(target, ["+JPperf", "map"]) as vm:
        try:
            theirs, ours = snapshot_vm_and_ours(vm, os.path.join(tmpdir(), "nofold.map"),
                                                "--no-fold")
            check(len(theirs) > 1000, "the VM's map has only %d entries" % len(theirs))
            ratio, missing, extra, detail = compare_maps(theirs, ours, "--no-fold")
            # README: "--no-fold reproduces the VM's own map line for line":
            # every line, nothing missing, nothing extra, no duplicates.
            check(not missing and not extra and sorted(theirs) == sorted(ours),
                  "--no-fold is not the VM's map line for line: %d of its %d lines missing, %d "
                  "of our %d lines extra" % (len(missing), len(theirs), len(extra), len(ours)),
                  detail)
            log("same order as the VM's file: %s" % (theirs == ours))
        finally:
            remove_quietly(default_map_path(vm.pid))


@per_vm(flavor="jit")
@asan("the folded map")
def test_fold_matches_folded_vm_perf_map(target):
    with VM(target, ["+JPperf", "map"]) as vm:
        try:
            theirs, ours = snapshot_vm_and_ours(vm, os.path.join(tmpdir(), "fold.map"))
            folded = fold_prologues(theirs)
            n_prologue = len(theirs) - len(folded)
            check(n_prologue > 100, "only %d prologue entries folded: is the VM's map "
                  "from a JIT VM?" % n_prologue)
            log("VM map: %d entries, %d prologues folded" % (len(theirs), n_prologue))
            ratio, missing, extra, detail = compare_maps(folded, ours, "folded")
            check(not missing and not extra and sorted(folded) == sorted(ours),
                  "the folded map is not the VM's with prologues folded: %d of its %d entries "
                  "missing, %d of our %d extra" % (len(missing), len(folded), len(extra),
                                                   len(ours)), detail)
            left = [e for e in ours if e[2].endswith(PROLOGUE)]
            check(not left, "%d '-CodeInfoPrologue' entries left in folded output" % len(left),
                  "\n".join(fmt(e) for e in left[:5]))
        finally:
            remove_quietly(default_map_path(vm.pid))


# --------------------------------------------------------------------------
# b. every function, with ground truth from the VM

def vm_functions(vm):
    """[(name, address or None)] of every function of every loaded module,
    names quoted as erts prints atoms (xb_inspect.erl)."""
    raw = vm.eval_raw("xb_inspect:functions()").decode("utf-8")
    out = []
    for line in raw.splitlines():
        name, addr = line.rsplit(" ", 1)
        out.append((name, None if addr == "-" else int(addr, 16)))
    return out


# The JIT registers its own stubs under a module that is never loaded.
PSEUDO_MODULES = ("erts_beamasm:",)


def check_every_function(vm, entries, truth, check_addresses):
    by_name = collections.defaultdict(list)
    for e in entries:
        by_name[e[2]].append(e)
    expected = {n for n, _ in truth}
    missing = [n for n in sorted(expected) if n not in by_name]
    dups = [n for n in sorted(expected) if len(by_name.get(n, ())) > 1]
    funcs_ours = {e[2] for e in entries
                  if "::" not in e[2] and not e[2].startswith(PSEUDO_MODULES)}
    extra = sorted(funcs_ours - expected)
    # Overlaps, over all entries (sorted by address).
    srt = sorted(entries)
    overlaps = [(a, b) for a, b in zip(srt, srt[1:]) if b[0] < a[0] + a[1]]
    empty = [e for e in entries if e[1] == 0]
    # Addresses.
    outside, checked, no_addr = [], 0, 0
    if check_addresses:
        for name, addr in truth:
            if addr is None:
                no_addr += 1
                continue
            es = by_name.get(name)
            if not es or len(es) != 1:
                continue
            s, z, _ = es[0]
            checked += 1
            if not (s <= addr < s + z):
                outside.append((name, addr, es[0]))
    mods = {n.split(":", 1)[0] for n, _ in truth}
    log("%d modules, %d functions; our map: %d entries; missing %d, duplicated %d, extra %d, "
        "overlapping pairs %d, empty %d" % (len(mods), len(expected), len(entries), len(missing),
                                            len(dups), len(extra), len(overlaps), len(empty)))
    if check_addresses:
        log("addresses: %d functions checked against erts_debug:disassemble/1, %d outside "
            "their entry, %d without an address" % (checked, len(outside), no_addr))
    check(len(truth) > 1000, "only %d functions reported by the VM" % len(truth))
    check(not missing, "%d functions have no entry" % len(missing), "\n".join(missing[:15]))
    check(not dups, "%d functions have more than one entry" % len(dups),
          "\n".join("%s: %s" % (n, [fmt(e) for e in by_name[n]]) for n in dups[:10]))
    check(not extra, "%d function entries name no loaded function" % len(extra),
          "\n".join(extra[:15]))
    check(not overlaps, "%d overlapping entries" % len(overlaps),
          "\n".join("%s  <>  %s" % (fmt(a), fmt(b)) for a, b in overlaps[:10]))
    check(not empty, "%d empty entries" % len(empty), "\n".join(fmt(e) for e in empty[:10]))
    if check_addresses:
        check(no_addr == 0, "erts_debug:disassemble/1 gave no address for %d functions"
              % no_addr)
        check(not outside, "%d functions start outside their entry" % len(outside),
              "\n".join("%s at %x, entry %s" % (n, a, fmt(e)) for n, a, e in outside[:10]))


def snapshot_functions(vm, path, *tool_args, env=None):
    """Ground truth and our map, taken while no module was loaded in between."""
    for attempt in range(3):
        vm.wait_code_quiet()
        before = vm.eval("lists:sort([M || {M, _} <- code:all_loaded()])")
        truth = vm_functions(vm)
        ok_run(run_tool(TOOL, *tool_args, "-o", path, vm.pid, timeout=30, env=env))
        if vm.eval("lists:sort([M || {M, _} <- code:all_loaded()])") == before:
            return truth, read_perf_map(path)
    raise AssertionError("the VM kept loading modules")


@per_vm(flavor="emu")
@asan("the interpreter's map")
def test_emu_every_function_once_at_its_address(target):
    with VM(target) as vm:
        truth, entries = snapshot_functions(vm, os.path.join(tmpdir(), "emu.map"))
        check_every_function(vm, entries, truth, check_addresses=True)


@per_vm(flavor="jit")
@asan("the JIT's map")
def test_jit_every_function_once(target):
    """The folded JIT map also has exactly one entry per function."""
    with VM(target) as vm:
        truth, entries = snapshot_functions(vm, os.path.join(tmpdir(), "jit.map"))
        check_every_function(vm, entries, truth, check_addresses=False)


# --------------------------------------------------------------------------
# d. safe writing

def expect_refusal(r, what):
    check(r.rc not in (0, None) and r.rc > 0 and not r.timed_out,
          "%s: expected a clean failure, got exit %s" % (what, r.rc), r.describe())
    lines = r.lines_err
    check(len(lines) == 1 and lines[0].strip(),
          "%s: expected exactly one non-empty line on stderr, got %d" % (what, len(lines)),
          r.describe())
    return lines[0]


@per_vm()
def test_default_path_written_0644(target):
    with VM(target) as vm:
        path = default_map_path(vm.pid)
        remove_quietly(path)
        old = os.umask(0o077)  # the file must be 0644 regardless of umask
        try:
            r = ok_run(run_tool(TOOL, vm.pid, timeout=30))
        finally:
            os.umask(old)
        try:
            st = os.lstat(path)
            check(stat.S_ISREG(st.st_mode), "%s is not a regular file" % path)
            check(stat.S_IMODE(st.st_mode) == 0o644,
                  "%s has mode %o, expected 644" % (path, stat.S_IMODE(st.st_mode)))
            check(st.st_uid == os.geteuid(), "%s owned by uid %d" % (path, st.st_uid))
            entries = read_perf_map(path)
            check(len(entries) > 1000, "only %d entries in %s" % (len(entries), path))
            check(not r.out and not r.err, "unexpected output", r.describe())
            leftovers = [f for f in os.listdir("/tmp")
                         if f.startswith(".perf-%d.map" % vm.pid)]
            check(not leftovers, "temporary files left in /tmp: %s" % leftovers)
            log("%s: %d entries, mode 0644" % (path, len(entries)))
        finally:
            remove_quietly(path)


@per_vm(only=["stock"])
@asan("refusals")
def test_refuses_symlink(target):
    with VM(target) as vm:
        path = default_map_path(vm.pid)
        remove_quietly(path)
        victim = os.path.join(tmpdir(), "victim")
        with open(victim, "w") as f:
            f.write("victim\n")
        dangling = os.path.join(tmpdir(), "not-there")
        try:
            for dest in (victim, dangling):
                os.symlink(dest, path)
                r = run_tool(TOOL, vm.pid, timeout=30)
                msg = expect_refusal(r, "symlink at %s" % path)
                check(os.path.islink(path) and os.readlink(path) == dest,
                      "the symlink %s was replaced or changed" % path)
                check(not os.path.exists(dangling), "wrote through a dangling symlink")
                with open(victim) as f:
                    check(f.read() == "victim\n", "the symlink's target was modified")
                check("link" in msg.lower(), "message does not say why: %r" % msg)
                os.unlink(path)
            log("refused: %s" % msg)
        finally:
            if os.path.islink(path) or os.path.exists(path):
                os.unlink(path)


@per_vm(only=["stock"])
@asan("refusals")
def test_refuses_foreign_owner(target):
    if os.geteuid() != 0:
        skip_because("needs-root", target, "chown a file to nobody")
    with VM(target) as vm:
        path = default_map_path(vm.pid)
        remove_quietly(path)
        try:
            with open(path, "w") as f:
                f.write("foreign\n")
            os.chown(path, 65534, 65534)
            r = run_tool(TOOL, vm.pid, timeout=30)
            msg = expect_refusal(r, "file owned by nobody at %s" % path)
            st = os.lstat(path)
            check(st.st_uid == 65534, "owner changed to %d" % st.st_uid)
            with open(path) as f:
                check(f.read() == "foreign\n", "the foreign file was modified")
            log("refused: %s" % msg)
        finally:
            remove_quietly(path)


@per_vm(flavor="jit")
@asan("refusals")
def test_default_path_refused_when_vm_writes_it(target):
    with VM(target, ["+JPperf", "map"]) as vm:
        path = default_map_path(vm.pid)
        try:
            check(wait_file_stable(path, quiet=0.3), "the VM did not write %s" % path)
            before = read_perf_map(path)
            r = run_tool(TOOL, vm.pid, timeout=30)
            msg = expect_refusal(r, "VM with +JPperf map")
            check("-o" in msg, "the message does not point to -o: %r" % msg)
            after = read_perf_map(path)
            check(after[:len(before)] == before, "the VM's own map was modified")
            log("refused: %s" % msg)
            # -o elsewhere works.
            ok_run(run_tool(TOOL, "-o", os.path.join(tmpdir(), "x.map"), vm.pid, timeout=30))
        finally:
            remove_quietly(path)


@per_vm()
def test_output_to_stdout(target):
    with VM(target) as vm:
        vm.wait_code_quiet()
        fpath = os.path.join(tmpdir(), "file.map")
        r1 = ok_run(run_tool(TOOL, "-o", "-", vm.pid, timeout=30))
        ok_run(run_tool(TOOL, "-o", fpath, vm.pid, timeout=30))
        check(not r1.err, "unexpected stderr", r1.describe())
        entries = parse_perf_map(r1.out)
        check(len(entries) > 1000, "only %d entries on stdout" % len(entries))
        with open(fpath, "rb") as f:
            check(f.read() == r1.out_bytes, "stdout and -o FILE differ")
        check(not os.path.exists(default_map_path(vm.pid)), "also wrote the default path")
        log("%d entries on stdout, identical to -o FILE" % len(entries))


# --------------------------------------------------------------------------
# e. --watch

def map_names(path):
    try:
        return {e[2] for e in read_perf_map(path)}
    except (OSError, ValueError):
        return set()


def wait_watch_started(p, out):
    """Wait until `--watch` (process p) has written its first map to out."""
    wait_for(lambda: os.path.exists(out) or p.poll() is not None, 5)
    if p.poll() is not None:
        raise AssertionError("--watch exited %s at once\n%s" % (
            p.returncode, p.stderr.read().decode("utf-8", "replace")))
    check(os.path.exists(out), "--watch wrote no map within 5 s")


@per_vm()
def test_watch_follows_loading_and_stops_with_vm(target):
    with VM(target) as vm:
        vm.wait_code_quiet()
        out = os.path.join(tmpdir(), "watch.map")
        p = spawn_tool(TOOL, "--watch", "-o", out, vm.pid)
        try:
            wait_watch_started(p, out)
            check("xb_watch_new:f1/0" not in map_names(out), "module present before loading")
            funcs = vm.eval("xb_loader:load(xb_watch_new, 6)")
            want = {"xb_watch_new:f%d/0" % i for i in range(1, 7)} | {
                "xb_watch_new:g/1", "xb_watch_new:module_info/0", "xb_watch_new:module_info/1"}
            t0 = time.monotonic()
            got = wait_for(lambda: want <= map_names(out), 5)
            check(got, "the map lacks the new module's functions 5 s after loading",
                  "missing: %s\nVM says: %s" % (sorted(want - map_names(out)), funcs))
            log("new module's %d functions in the map after %.2fs"
                % (len(want), time.monotonic() - t0))
            check(p.poll() is None, "--watch exited early (%s)" % p.returncode)
            vm.kill()
            t0 = time.monotonic()
            try:
                rc = p.wait(5)
            except Exception:
                raise AssertionError("--watch still running 5 s after the VM died")
            err = p.stderr.read().decode("utf-8", "replace")
            check(rc == 0, "--watch exited %s after the VM died" % rc, err)
            log("--watch exited 0 %.2fs after the VM was killed" % (time.monotonic() - t0))
        finally:
            if p.poll() is None:
                p.kill()


def fill(directory):
    """Fill the file system of DIRECTORY (a small tmpfs) to the last byte:
    the filler's path."""
    path = os.path.join(directory, "filler")
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            check(e.errno == errno.ENOSPC, "filling %s: %s" % (directory, e))
    try:
        with open(path, "ab", buffering=0) as f:
            while True:
                f.write(b"\0")
    except OSError:
        pass
    return path


@per_vm(only=["stock"])
@timeout(120)
def test_watch_says_when_the_map_falls_behind(target):
    """--watch on a file system that fills up: the rewrite that fails is
    said once (not at every interval), the map on disk stays the last one
    written, whole, with no temporary file beside it; once there is room
    the map catches up and that is said; a map still behind when the
    watch ends (the VM exits) makes the run fail with one line naming the
    file (exit 1: it used to warn at each interval and exit 0)."""
    with VM(target) as vm:
        vm.wait_code_quiet()
        small = os.path.join(tmpdir(), "small")
        os.makedirs(small)
        r = run_cmd(["mount", "-t", "tmpfs", "-o", "size=4m", "xbtest-small", small], timeout=20)
        check(r.rc == 0, "mount a 4 MiB tmpfs", r.describe())
        out = os.path.join(small, "watch.map")
        p = spawn_tool(TOOL, "--watch", "--interval", "50", "-o", out, vm.pid)
        try:
            wait_watch_started(p, out)
            first = open(out, "rb").read()
            filler = fill(small)
            vm.eval("xb_loader:load(xb_behind_a, 200)")
            # ten intervals and more: one warning
            time.sleep(1.0)
            check(p.poll() is None, "--watch exited on a full disk (%s)" % p.returncode)
            check(open(out, "rb").read() == first, "the map on disk changed while the disk was full")
            check(sorted(os.listdir(small)) == ["filler", "watch.map"], "left on the full file system: %s"
                  % sorted(os.listdir(small)))
            os.unlink(filler)
            check(wait_for(lambda: "xb_behind_a:f200/0" in map_names(out), 5),
                  "the map did not catch up within 5 s of the room coming back")
            # behind again when the VM exits
            fill(small)
            vm.eval("xb_loader:load(xb_behind_b, 200)")
            time.sleep(0.3)
            vm.kill()
            rc = p.wait(10)
            err = p.stderr.read().decode("utf-8", "replace")
            lines = [l for l in err.splitlines() if l.strip()]
            warned = [l for l in lines if "warning:" in l]
            check(len(warned) == 2 and all("No space" in l and out in l for l in warned),
                  "want one warning each time the disk filled, naming the file: %r" % warned, err)
            check(sum(1 for l in lines if "up to date again" in l) == 1, "the catching up not said", err)
            check(rc == 1 and "the map is behind the VM's code" in lines[-1] and out in lines[-1],
                  "--watch ended with the map behind: exit %s, last line %r" % (rc, lines[-1:]), err)
            check("xb_behind_b:f1/0" not in map_names(out) and "xb_behind_a:f200/0" in map_names(out),
                  "the map on disk is not the last one written")
            log("a full disk: %s" % "; ".join(lines))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            run_cmd(["umount", small], timeout=20)


@per_vm(only=["stock", "otp25-emu-dwarf"])
@asan("signals during --watch")
def test_watch_stops_on_sigint_and_sigterm(target):
    with VM(target) as vm:
        for sig in (signal.SIGINT, signal.SIGTERM):
            out = os.path.join(tmpdir(), "watch-%d.map" % sig)
            p = spawn_tool(TOOL, "--watch", "-o", out, vm.pid)
            try:
                wait_watch_started(p, out)
                time.sleep(0.3)
                p.send_signal(sig)
                try:
                    rc = p.wait(5)
                except Exception:
                    raise AssertionError("--watch still running 5 s after %s" % sig.name)
                err = p.stderr.read().decode("utf-8", "replace")
                check(rc == 0, "--watch exited %s on %s" % (rc, sig.name), err)
                check(os.path.exists(out), "map removed on %s" % sig.name)
            finally:
                if p.poll() is None:
                    p.kill()
        check(vm.alive(), "the VM died")


# --------------------------------------------------------------------------
# f. finding beam_ranges' `r` through code references

@per_vm(flavor="emu")
@asan("code ranges by references")
def test_ranges_by_refs_gives_identical_map(target):
    with VM(target) as vm:
        vm.wait_code_quiet()
        a = os.path.join(tmpdir(), "symbols.map")
        b = os.path.join(tmpdir(), "refs.map")
        for attempt in range(3):
            ok_run(run_tool(TOOL, "-o", a, vm.pid, timeout=30))
            rb = ok_run(run_tool(TOOL, "-v", "-v", "-o", b, vm.pid, timeout=30,
                                 env={"EXTROSPECT_RANGES_BY_REFS": "1"}))
            ra = ok_run(run_tool(TOOL, "-o", a, vm.pid, timeout=30))
            with open(a, "rb") as fa, open(b, "rb") as fb:
                da, db = fa.read(), fb.read()
            if da == db:
                break
        n = len(da.splitlines())
        check(n > 1000, "only %d entries" % n)
        check(da == db, "EXTROSPECT_RANGES_BY_REFS=1 gives a different map",
              "without: %d lines, with: %d lines" % (n, len(db.splitlines())))
        # The variable must have taken effect: -v says how `r` was found.
        check("code references" in rb.err,
              "EXTROSPECT_RANGES_BY_REFS=1 not honoured: -v -v does not say that beam_ranges' "
              "`r` was found via code references", rb.describe())
        log("identical maps (%d entries) with and without EXTROSPECT_RANGES_BY_REFS=1" % n)
