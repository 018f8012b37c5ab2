"""Safe to point at any process as root: hostile targets.

The target controls its memory, its command line and its files.  Small
programs named beam.smp (tests/fixtures/fakebeam.c, built here) play the
hostile VM:
  - files: -root's release files that are FIFOs, /dev/zero, symlinks to
    root-only files, symlinks leaving a chroot; a .gnu_debuglink naming a
    FIFO; the executable swapped for a symlink or another file after it
    started.  Each tool exits within 3 s, with one line on stderr, under
    100 MB of RSS, and never prints the secret.
  - memory: synthetic VMs (a cyclic JIT chain, a 64 GiB heap, 2^24 atoms
    of 1 KB, 2^20 modules of 64 MiB) and random bytes in every read
    (EXTROSPECT_FAULT=random): every tool finishes within fixed time and
    memory and prints no Erlang frame that is not in the synthetic code
    map.
  - a real VM whose reads are corrupted (1 % flipped, EXTROSPECT_FAULT):
    no crash, every printed Erlang frame a loaded function.
  - options: every numeric option's bad values (exit 2, one line).
  - ^C honoured within 100 ms; the VM exiting during attach: one line;
    file capabilities instead of root: other users' processes refused.
"""

import concurrent.futures
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

from xbsample import loaded_functions, parse_table, wait_running
from xbtest import (alone, asan, derived_target, ROOT, VM, check, log, per_vm, run_cmd, run_tool, sanitized, skip,
                    skip_because, suite,
                    time_scale, timeout, tmpdir, tool_path, untraced_leak_check, wait_for, read_perf_map)

SAMPLE = "erlang-sample"
PERFMAP = "erlang-write-perf-map"
HEAP = "erlang-heapsample"
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "fakebeam.c")
TABLE = os.path.join(ROOT, "src", "beam", "releases", "erts-13.1.5.c")
SECRET = "XB-SECRET-7d1f3a"
CRASH = ("Assertion", "Sanitizer", "runtime error", "Segmentation", "core dumped")
# What the synthetic JIT VMs register (fakebeam.c module_symfile).
SYNTH_FRAMES = {"fake:spin/0", "fake:f1/1", "fake:f2/2"}
# A sanitizer build (XB_BUILD_DIR=build-asan) is slower and bigger: the
# bounds stretch (time_scale()), the rules do not.  Asked at each use, not
# at import: pytest imports the tests before the conftest sets a
# sanitizer twin's XB_BUILD_DIR (CI: 330 MB against an unscaled 200 MB bound under ASan).


# ---------------------------------------------------------------------------
# fixtures

def build_fixture(where, emu=False):
    """DIR/erts-13.1.5/bin/beam.smp, reachable by user nobody."""
    # The fake VM's memory is built to break the readers, not to look like
    # a live VM: its struct layout cannot be proven (tests/acceptance/
    # test_releases.py proves real ones), so the tools are told to go on
    # (for the rest of this test: conftest restores the environment).
    os.environ["EXTROSPECT_LAYOUT_UNPROVEN"] = "1"
    bindir = os.path.join(where, "erts-13.1.5", "bin")
    os.makedirs(bindir, exist_ok=True)
    exe = os.path.join(bindir, "beam.smp")
    cmd = ["cc", "-O1", "-pthread", "-rdynamic", "-I", os.path.join(ROOT, "include"), FIXTURE, TABLE,
           "-o", exe] + (["-DFAKEBEAM_EMU"] if emu else [])
    r = run_cmd(cmd, timeout=60)
    check(r.rc == 0, "cannot build the fixture", r.describe())
    d = bindir
    while d.startswith(tmpdir()):
        os.chmod(d, 0o755)
        d = os.path.dirname(d)
    return exe


class Fixture:
    """A running fake beam (killed on exit)."""

    def __init__(self, exe, *args, user=None, cwd=None):
        argv = [exe] + (["user", str(user)] if user is not None else []) + [str(a) for a in args]
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
        line = self.p.stdout.readline().decode()
        check(line.strip() == "ready", "the fixture did not start: %r %s" %
              (line, self.p.stderr.read(500) if self.p.poll() is not None else ""))
        self.pid = self.p.pid

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def measured(name, *args, timeout=30, env=None):
    """Run a tool under /usr/bin/time: (Result, peak RSS in KB); the
    Result's cpu_s is the tool's CPU time (user + system), what a limit on
    the tool's own work bounds on a machine saturated by others, where its
    wall time stretches with its share of a CPU (tests/soak-saturated.sh:
    a walk of 1.5 s alone took 10.9 s there)."""
    f = os.path.join(tmpdir(), "rss.%d" % time.monotonic_ns())
    full = dict(os.environ)
    full.update(env or {})
    r = run_cmd(["/usr/bin/time", "-o", f, "-f", "XB-TIME %M %U %S", tool_path(name)] + [str(a) for a in args],
                timeout=timeout, env=full)
    rss, r.cpu_s = 0, None
    try:
        with open(f) as fh:
            m = re.findall(r"^XB-TIME (\d+) ([\d.]+) ([\d.]+)$", fh.read(), re.M)
            if m:
                rss, r.cpu_s = int(m[-1][0]), float(m[-1][1]) + float(m[-1][2])
    except OSError:
        pass
    for t in CRASH:
        check(t not in r.err, "%s crashed: %r" % (name, t), r.describe())
    check(r.rc is not None and 0 <= r.rc < 128, "%s killed (exit %s)" % (name, r.rc), r.describe())
    return r, rss


def within_time(r, limit_s):
    """The tool's own work within LIMIT_S (scaled) of CPU time, and no hang:
    its wall time within three times that."""
    return (not r.timed_out and r.cpu_s is not None and r.cpu_s < limit_s * time_scale()
            and r.elapsed < 3 * limit_s * time_scale())


def one_line_failure(r, rss, what, limit_s=3.0, limit_kb=100 * 1024, check_mode=False):
    """Within the limits (scaled by time_scale()), never the secret, and
    when it fails, one line (--check reports its failed checks on stdout,
    one line each, and only notes on stderr)."""
    limit_s, limit_kb = limit_s * time_scale(), limit_kb * time_scale()
    # wall time: these cases are about hangs (a FIFO, a debuglink to one)
    check(not r.timed_out and r.elapsed < limit_s, "%s: took %.1f s (limit %.0f s)" % (what, r.elapsed, limit_s),
          r.describe())
    check(rss < limit_kb, "%s: peak RSS %d KB (limit %d KB)" % (what, rss, limit_kb), r.describe())
    check(SECRET not in r.out and SECRET not in r.err, "%s: printed the secret" % what, r.describe())
    lines = [l for l in r.err.splitlines() if l.strip() and not re.match(r"(erlang-[a-z-]+: )?note:", l)]
    if r.rc != 0 and "checks passed" not in r.out:
        check(len(lines) == 1, "%s: %d lines on stderr, expected 1" % (what, len(lines)), r.describe())


def all_tools(pid):
    """(name, args) of every mode against PID."""
    return [(SAMPLE, ["-d", "1", pid]), (SAMPLE, ["--pstack", "--pstack-wait", "0.5", pid]),
            (SAMPLE, ["--check", pid]), (PERFMAP, ["-o", os.path.join(tmpdir(), "map"), pid]),
            (HEAP, [pid]), (HEAP, ["--alloc", pid]), (HEAP, ["--contents", "<0.1.0>", pid])]


def secret_file(d, name="secret", mode=0o600, before=""):
    """A root-only file holding SECRET (after BEFORE: a file the parser
    that reads it would take, so that a read shows)."""
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write("%s%s\n" % (before, SECRET))
    os.chmod(p, mode)
    return p


# ---------------------------------------------------------------------------
# files the target names

def release_root(d):
    root = os.path.join(d, "otp")
    os.makedirs(os.path.join(root, "releases", "25"))
    for p in (d, root, os.path.join(root, "releases"), os.path.join(root, "releases", "25")):
        os.chmod(p, 0o755)
    return root


def run_file_case(exe, root, what, user=65534):
    with Fixture(exe, "idle", "-root", root, user=user) as fx:
        for name, args in all_tools(fx.pid):
            r, rss = measured(name, *args, timeout=20)
            one_line_failure(r, rss, "%s %s (%s)" % (name, args[0], what))
            if args[0] == "--check":
                check("FAIL" in r.out or r.rc != 0, "%s: --check passed a fake VM" % what, r.out)
        log("%s: every tool done within 3 s, one line, no secret" % what)


def test_release_files_hostile():
    """start_erl.data / OTP_VERSION as a FIFO, /dev/zero, a symlink to a
    root-only file, a directory symlink into a root-only directory."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    sec = secret_file(d)
    # start_erl.data is "ERTS_VSN REL_VSN": the secret as the release,
    # which --check would print were the file read
    sec_erl = secret_file(d, "secret_erl", before="13.1.5 ")
    secdir = os.path.join(d, "secretdir")
    os.makedirs(os.path.join(secdir, "25"))
    with open(os.path.join(secdir, "start_erl.data"), "w") as f:
        f.write("13.1.5 25\n")
    secret_file(os.path.join(secdir, "25"), "OTP_VERSION", 0o600)
    os.chmod(os.path.join(secdir, "start_erl.data"), 0o600)
    os.chmod(secdir, 0o700)
    cases = [
        ("start_erl.data is a FIFO", lambda p: os.mkfifo(p)),
        ("start_erl.data -> /dev/zero", lambda p: os.symlink("/dev/zero", p)),
        ("start_erl.data -> a root-only file", lambda p: os.symlink(sec_erl, p)),
    ]
    for what, make in cases:
        root = release_root(os.path.join(d, "c%d" % cases.index((what, make))))
        make(os.path.join(root, "releases", "start_erl.data"))
        run_file_case(exe, root, what)
    # a valid start_erl.data, a hostile OTP_VERSION
    for i, (what, make) in enumerate([("OTP_VERSION is a FIFO", lambda p: os.mkfifo(p)),
                                      ("OTP_VERSION -> /dev/zero", lambda p: os.symlink("/dev/zero", p)),
                                      ("OTP_VERSION -> a root-only file", lambda p: os.symlink(sec, p))]):
        root = release_root(os.path.join(d, "v%d" % i))
        with open(os.path.join(root, "releases", "start_erl.data"), "w") as f:
            f.write("13.1.5 25\n")
        make(os.path.join(root, "releases", "25", "OTP_VERSION"))
        run_file_case(exe, root, what)
    # the releases directory a symlink into a directory only root reads
    root = os.path.join(d, "dirlink")
    os.makedirs(root)
    os.chmod(root, 0o755)
    os.symlink(secdir, os.path.join(root, "releases"))
    run_file_case(exe, root, "releases -> a root-only directory")


def test_release_files_stay_in_the_root():
    """A chrooted target whose releases directory is an absolute symlink
    to a (world-readable) host directory: read inside its root, where that
    path does not exist, never the host's."""
    d = tmpdir()
    chroot = os.path.join(d, "root")
    exe = build_fixture(chroot)
    host = os.path.join(d, "hostrel")
    os.makedirs(os.path.join(host, "SECRETREL"))
    with open(os.path.join(host, "start_erl.data"), "w") as f:
        f.write("13.1.5 XBSECRETREL\n")
    os.makedirs(os.path.join(host, "XBSECRETREL"))
    secret_file(os.path.join(host, "XBSECRETREL"), "OTP_VERSION", 0o644)
    otp = os.path.join(chroot, "otp")
    os.makedirs(otp)
    os.symlink(host, os.path.join(otp, "releases"))  # absolute: the host's path
    for p in (d, chroot, otp, host):
        os.chmod(p, 0o755)
    with Fixture(exe, "chroot", chroot, "-root", "/otp") as fx:
        r, rss = measured(SAMPLE, "--check", fx.pid, timeout=20)
        one_line_failure(r, rss, "--check on a chrooted target")
        check("XBSECRETREL" not in r.out and "XBSECRETREL" not in r.err,
              "the host's release file was read through the target's symlink", r.describe())
        check("erts 13.1.5" in r.out, "the chrooted target's own binary was not found", r.describe())
        log(r.out.splitlines()[0] if r.out else r.err)


def test_debuglink_to_fifo():
    """A .gnu_debuglink naming a FIFO next to the binary (and in its .debug/
    directory, libdwfl's other place to look): never followed, never
    opened (debug info is looked up by build-id only).  Every tool within
    3 s and 100 MB, one line when it fails, no secret; and strace -f shows
    no open of either FIFO (a lookup that followed the link but gave up
    quickly would pass the time limit: the trace is the proof)."""
    strace = shutil.which("strace")
    if not strace:
        skip_because("needs-package", None, "strace")
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    dbg = exe + ".debug"
    r = run_cmd(["objcopy", "--only-keep-debug", exe, dbg], timeout=30)
    check(r.rc == 0, "objcopy", r.describe())
    r = run_cmd(["objcopy", "--strip-debug", "--remove-section=.symtab", "--add-gnu-debuglink=" + dbg, exe],
                timeout=30)
    check(r.rc == 0, "objcopy --add-gnu-debuglink", r.describe())
    os.unlink(dbg)
    os.mkfifo(dbg)
    os.makedirs(os.path.join(os.path.dirname(exe), ".debug"), exist_ok=True)
    os.mkfifo(os.path.join(os.path.dirname(exe), ".debug", os.path.basename(dbg)))
    link = os.path.basename(dbg)
    with Fixture(exe, "jit", "ok") as fx:
        for name, args in all_tools(fx.pid):
            what = "%s %s (debuglink to a FIFO)" % (name, args[0])
            r, rss = measured(name, *args, timeout=20)
            one_line_failure(r, rss, what)
            trace = os.path.join(tmpdir(), "strace.debuglink.txt")
            t = run_cmd([strace, "-f", "-qq", "-o", trace, "-e", "trace=open,openat,openat2",
                         tool_path(name)] + [str(a) for a in args], timeout=60 * time_scale(),
                        env=untraced_leak_check())
            check(not t.timed_out, "%s under strace: hung" % what, t.describe())
            with open(trace) as f:
                opens = f.read().splitlines()
            # the trace holds the tool's opens: the target's ELF among them
            check(any(re.search(r'"[^"]*beam\.smp"', o) for o in opens),
                  "%s: strace shows no open of the fixture's beam.smp: nothing traced?" % what,
                  "\n".join(opens[-20:]))
            followed = [o for o in opens if link in o]
            check(not followed, "%s opened the debuglink's target (a FIFO)" % what, "\n".join(followed[:5]))
    log("debuglink to a FIFO: every tool done within %.0f s, one line when it fails, and strace shows no "
        "open of %s (beside the binary or in .debug/)" % (3 * time_scale(), link))


def test_executable_swapped():
    """Under /proc/PID/root the target's executable is swapped, after it
    started, for a symlink to a secret (a directory bind-mounted over its
    bin/ in a mount namespace of its own), or for another file (the secret
    bind-mounted over it): the tool opens only the file the process maps
    (same device and inode), never what the path names there now."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    sec = secret_file(d, "secret-elf", 0o600)
    evil = os.path.join(d, "evil")
    os.makedirs(evil)
    os.symlink(sec, os.path.join(evil, "beam.smp"))
    bindir = os.path.dirname(exe)
    for what, src, dst, why in (("bin/ holds a symlink", evil, bindir, "a symbolic link (not followed)"),
                                ("another file over beam.smp", sec, exe, "is not the file the process maps")):
        with Fixture(exe, "mount", src, dst, "jit", "ok") as fx:
            for name, args in all_tools(fx.pid):
                r, rss = measured(name, *(["-v"] + args), timeout=20)
                one_line_failure(r, rss, "%s %s (%s)" % (name, args[0], what))
                # Without its ELF file the VM is still read (its globals
                # found by their contents, as for a stripped beam); the
                # file now under that path is never used.
                check(why in r.err, "%s %s (%s): -v does not say the file was refused" % (name, args[0], what),
                      r.describe())
            log("%s: %s" % (what, [l for l in r.err.splitlines() if why in l][0]))


# ---------------------------------------------------------------------------
# synthetic VMs (memory)

ERLANG_FRAME = re.compile(r"(\S+:\S+/\d+)")


TABLE_ERLANG_ROW = re.compile(r"^\s*\d+\s+(\S+:\S+/\d+)(?: \([^)]*\))?\s+\d+\.\d+%\s+\[Erlang\]$")
STACK_ERLANG_FRAME = re.compile(r"(?:0x[0-9a-f]+ )?(\S+:\S+/\d+) *(?:\(|\[Erlang\])")


def printed_erlang_frames(text):
    """The Erlang functions named in erlang-sample's table rows
    ('COUNT NAME PCT% [Erlang]') and --pstack frames ('0x... NAME
    [Erlang]'); a line tagged [Erlang] in neither form fails the test (a
    check that cannot see the names would hold whatever they are)."""
    names = set()
    for line in text.splitlines():
        if "[Erlang]" in line:
            m = TABLE_ERLANG_ROW.match(line) or STACK_ERLANG_FRAME.search(line)
            check(m, "a line tagged [Erlang] that names no M:F/A: %r" % line)
            names.add(m.group(1))
    return names


def synthetic_case(exe, mode, case, env=None, limit_s=10.0, limit_kb=200 * 1024):
    limit_cpu, limit_kb = limit_s, limit_kb * time_scale()
    with Fixture(exe, mode, case) as fx:
        results = []
        for name, args in all_tools(fx.pid):
            r, rss = measured(name, *args, timeout=60, env=env)
            what = "%s %s on %s %s%s" % (name, args[0], mode, case, " (%s)" % env if env else "")
            check(within_time(r, limit_cpu), "%s: took %.1f s (%s s of CPU)" % (what, r.elapsed, r.cpu_s),
                  r.describe())
            check(rss < limit_kb, "%s: peak RSS %d KB (limit %d)" % (what, rss, limit_kb), r.describe())
            text = r.out
            if name == PERFMAP and os.path.exists(args[2]):
                with open(args[2], errors="replace") as f:
                    text = f.read()
                names = {l.split(" ", 2)[2] for l in text.splitlines() if l.count(" ") >= 2}
                extra = {n for n in names if ":" in n and "/" in n and n not in SYNTH_FRAMES}
                check(not extra, "%s: map names outside the synthetic code map: %s" % (what, sorted(extra)[:5]))
                os.unlink(args[2])
            else:
                extra = printed_erlang_frames(text) - SYNTH_FRAMES
                check(not extra, "%s: frames outside the synthetic code map: %s" % (what, sorted(extra)[:5]),
                      r.describe() + "\n" + r.out[:1500])
            results.append((what, r, rss))
        log("%s %s: %s" % (mode, case, "; ".join("%s %.1fs %dMB rc %d" % (w.split(" on ")[0], r.elapsed,
                                                                         rss // 1024, r.rc)
                                                 for w, r, rss in results)))
        return results


def test_synthetic_jit_vm_named_right():
    """The well-formed synthetic JIT VM: its stack is named exactly."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    res = synthetic_case(exe, "jit", "ok")
    pstack = [r for w, r, _ in res if "--pstack" in w][0]
    check(re.search(r"fake:spin/0 \[Erlang\]\n.*fake:f1/1 \[Erlang\]\n.*fake:f2/2 \[Erlang\]", pstack.out),
          "--pstack does not show spin <- f1 <- f2", pstack.out)
    # the table's rows are read by the same check as --pstack's frames
    table = [r for w, r, _ in res if w.startswith(SAMPLE + " -d")][0]
    check(printed_erlang_frames(table.out) == {"fake:spin/0"}, "the table's [Erlang] rows are not fake:spin/0 "
          "alone", table.out)


def test_synthetic_cyclic_jit_chain():
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    res = synthetic_case(exe, "jit", "cyclic")
    sample = [r for w, r, _ in res if " -d " in w or w.startswith(SAMPLE + " -d")][0]
    check("fake:spin/0" in sample.out, "the registrations before the loop were not used", sample.out)
    check("JIT chain loops" in sample.err, "the loop was not reported", sample.err)


def test_synthetic_long_jit_chain():
    """A JIT registration chain longer than its budget (2^20 entries) and
    no loop: the walk stops at the budget and says so, the registrations
    before it still name the code, every tool within its time and memory."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    with Fixture(exe, "jit", "long") as fx:
        # (two tools: each walks the whole budget, 1.5 s; the other modes
        # build the same code map, test_synthetic_cyclic_jit_chain runs them)
        mp = os.path.join(tmpdir(), "map")
        for name, args in ((SAMPLE, ["-v", "-d", "1"]), (PERFMAP, ["-o", mp])):
            r, rss = measured(name, *(args + [fx.pid]), timeout=60)
            what = "%s %s" % (name, args[-2])
            check(r.rc == 0 and within_time(r, 10),
                  "%s: exit %s after %.1f s (%s s of CPU)" % (what, r.rc, r.elapsed, r.cpu_s), r.describe())
            check(rss < 200 * 1024 * time_scale(), "%s: peak RSS %d KB" % (what, rss))
            check("JIT registration chain has more than 1048576 entries" in r.err if name == SAMPLE
                  else "JIT chain length" in r.err, "%s: the chain's budget was not reported" % what, r.err)
            text = r.out if name == SAMPLE else open(mp).read()
            check("fake:spin/0" in text, "%s: the registrations before the budget were not used" % what, text)
            log("%s: %.1f s, %d MB" % (what, r.elapsed, rss // 1024))


def test_synthetic_code_loading_during_pstack():
    """--pstack keeps every code map version its frames point into until
    it prints: a VM that loads code all the time, with a scheduler that
    never shows a process (so --pstack waits), stops at 16 versions and
    says so, instead of growing with every load."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    with Fixture(exe, "jit", "loading") as fx:
        r, rss = measured(SAMPLE, "-v", "--pstack", "--pstack-wait", "3", fx.pid, timeout=60)
        check(r.rc == 0 and within_time(r, 10),
              "--pstack: exit %s after %.1f s (%s s of CPU)" % (r.rc, r.elapsed, r.cpu_s), r.describe())
        check(rss < 200 * 1024 * time_scale(), "--pstack: peak RSS %d KB" % rss)
        check("16 code map versions kept for --pstack; no more rebuilds" in r.err,
              "the budget of code map versions was not reported", r.err[-3000:])
        m = re.search(r"code map refreshes (\d+)", r.err)
        check(m and int(m.group(1)) == 16, "code map refreshes: %s (16 kept, then no more)"
              % (m and m.group(1)), r.err[-3000:])
        log("--pstack on a VM loading code every 20 ms: %.1f s, %d MB, %s refreshes" % (
            r.elapsed, rss // 1024, m.group(1)))


def test_synthetic_line_tables_over_budget():
    """--lines reads a module's line records on first use, within 64 MiB
    for all modules: six modules of a million records (16 MB each) on the
    stack, the first five named with their lines (the call's: line 16),
    the sixth without, and the budget's note; memory stays near it."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    with Fixture(exe, "jit", "lines") as fx:
        r, rss = measured(SAMPLE, "--lines", "-d", "1", "--format", "folded", fx.pid, timeout=60)
        check(r.rc == 0 and within_time(r, 10),
              "--lines: exit %s after %.1f s (%s s of CPU)" % (r.rc, r.elapsed, r.cpu_s), r.describe())
        check(rss < 250 * 1024 * time_scale(), "--lines: peak RSS %d KB" % rss)
        want = ";".join(["lm6:f/0"] + ["lm%d:f/0 (lm.erl:16)" % k for k in range(5, 0, -1)] + ["fake:spin/0"])
        stacks = [l.rsplit(" ", 1)[0] for l in r.out.splitlines()]
        check(stacks and all(st == want for st in stacks), "stacks are not %s" % want, r.out[:1500])
        check("(line records 1)" in r.err, "the line-table budget was not reported", r.err)
        log("--lines over 6 x 1,000,000 line records: %.1f s, %d MB; %s" % (r.elapsed, rss // 1024, want))


def test_synthetic_64g_heap():
    """A stack of 64 GiB: each sample's walk stops at its byte cap and
    says so.  Then sampled faster than its samples can be walked (1 MiB of
    reads each, 4999 Hz): the run still ends at its -d (the soak once saw
    it not end in 60 s: libbpf's consume read the BPF ring until empty,
    and a slow consumer never empties it), and what it could not process
    is reported, not silently dropped."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    res = synthetic_case(exe, "jit", "heap64g")
    sample = [r for w, r, _ in res if w.startswith(SAMPLE + " -d")][0]
    check("stack walk bytes" in sample.err, "the stack walk's byte cap was not reported", sample.err)
    with Fixture(exe, "jit", "heap64g") as fx:
        r, rss = measured(SAMPLE, "-F", "4999", "-d", "1", fx.pid, timeout=60)
        # the run's own second, its attach and report; stretched on a
        # saturated machine by at most its share of a CPU (within_time:
        # the limit on its CPU, three times that on the wall clock)
        check(r.rc == 0 and within_time(r, 4), "-F 4999 -d 1: exit %s after %.1f s (%s s of CPU)"
              % (r.rc, r.elapsed, r.cpu_s), r.describe())
        check(printed_erlang_frames(r.out) <= SYNTH_FRAMES, "frames outside the synthetic code map",
              r.out[:1500])
        behind = re.search(r"(\d+) samples were still queued when the run ended", r.err)
        lost = re.search(r"the kernel lost (\d+) samples", r.err)
        # or walked only to their innermost function once too late to read
        # the rest (the sampler's staleness bound), and said so
        late = re.search(r"(\d+)% of the samples name only their innermost Erlang function", r.err)
        check(behind or lost or (late and int(late.group(1)) > 0), "sampled faster than it can walk, and "
              "neither samples left queued, nor lost, nor walked to their innermost function reported",
              r.err[-2000:])
        log("-F 4999 -d 1 on a 64 GiB stack: %.1f s (%.1f s of CPU), %s left queued, %s lost" % (
            r.elapsed, r.cpu_s or 0, behind and behind.group(1), lost and lost.group(1)))


def test_contents_hostile_heaps():
    """--contents on heaps built against it: a heap where every word looks
    like an object boundary and no run of 16 objects parses (fakebeam
    'bigheap': 32 MiB of bignum headers, every 16th block poisoned) reads
    at most twice --max-words, the search for boundaries included (it read
    155 M words for --max-words 256Ki), and says what it found in one line;
    a heap fragment list that loops ('fragloop': one 4-word fragment whose
    next is itself) is said to loop, never counted as 4096 fragments of
    "exact shares"."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    maxw = 262144
    with Fixture(exe, "jit", "bigheap") as fx:
        for args in (["--max-words", str(maxw), "--seed", "1"], ["--max-words", str(maxw), "--seed", "2"], []):
            r, rss = measured(HEAP, "--contents", "<0.5.0>", *(args + [fx.pid]), timeout=120)
            what = "--contents %s (bigheap)" % " ".join(args)
            check(within_time(r, 3.0), "%s: took %.1f s (%s s of CPU)" % (what, r.elapsed, r.cpu_s), r.describe())
            one_line_failure(r, rss, what)
            if args:
                m = re.search(r"\(?(\d+) words read", r.out + r.err)
                check(m, "%s: does not say how much it read" % what, r.describe())
                check(int(m.group(1)) <= 2 * maxw + 4096, "%s: read %s words (budget %d)"
                      % (what, m.group(1), 2 * maxw), r.describe())
                check(r.rc == 0 or "read budget" in r.err, "%s: failed without naming the budget" % what,
                      r.describe())
            log("%s: exit %d, %.2f s, %s" % (what, r.rc, r.elapsed, (r.err or r.out).strip().splitlines()[0]))
    with Fixture(exe, "jit", "fragloop") as fx:
        r, rss = measured(HEAP, "--contents", "<0.5.0>", fx.pid, timeout=60)
        what = "--contents (fragloop)"
        check(within_time(r, 3.0), "%s: took %.1f s" % (what, r.elapsed), r.describe())
        one_line_failure(r, rss, what)
        check("exact" not in r.out, "%s: a looping fragment chain claimed as exact" % what, r.describe())
        check(r.rc != 0 and "loops" in r.err, "%s: the loop is not said" % what, r.describe())


def test_allocator_list_loop():
    """erlang-heapsample --alloc on an allocator table whose first type's
    carrier list loops (fakebeam 'allocloop': two carriers pointing to each
    other): that type is said not walked, the others are walked, within
    3 s (the walk followed the loop to its bound of a million carriers,
    counted 3.8 GB resident in 8 KiB of carriers, and marked every type
    not walked)."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    with Fixture(exe, "jit", "allocloop") as fx:
        r, rss = measured(HEAP, "--alloc", "--format", "csv", fx.pid, timeout=60)
        what = "--alloc (allocloop)"
        check(within_time(r, 3.0), "%s: took %.1f s (%s s of CPU)" % (what, r.elapsed, r.cpu_s), r.describe())
        check(r.rc == 0, "%s: exit %s" % (what, r.rc), r.describe())
        rows = [l.split(",") for l in r.out.splitlines()]
        check(len(rows) > 3 and "free_bytes" in rows[0], "%s: no CSV table" % what, r.out[:500])
        col = rows[0].index("free_bytes")
        walked = {row[0]: row[col] != "" for row in rows[1:]}
        check(walked.get("xab_alloc") is False, "%s: the looping type reported as walked" % what, r.out[:800])
        others = [n for n in walked if n != "xab_alloc"]
        check(others and all(walked[n] for n in others), "%s: types after the loop not walked: %s"
              % (what, [n for n in others if not walked[n]]), r.out[:800])
        check("loops" in r.err and "stopped after" not in r.err, "%s: the loop is not said" % what, r.err)
        check(not re.search(r"resident of", r.err), "%s: residency claimed over a looping list" % what, r.err)
        log("%s: %d types walked, the looping one not; %.2f s" % (what, len(others), r.elapsed))


def test_synthetic_huge_atom_table():
    """2^24 atoms: the atom cache stops at its budget and every tool that
    got as far as naming atoms says so (a note, one line)."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"), emu=True)
    res = synthetic_case(exe, "emu", "atoms")
    for what, r, _ in res:
        if r.rc == 0:
            check("atom cache full" in r.err, "%s: the atom cache's budget was not reported" % what,
                  r.describe())
    check(sum(r.rc == 0 for _, r, _ in res) >= 4, "fewer than 4 modes got past attaching",
          "\n".join("%s: exit %s" % (w, r.rc) for w, r, _ in res))


def test_synthetic_huge_module_table():
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"), emu=True)
    res = synthetic_case(exe, "emu", "modules")
    # every tool that builds the code map says it stopped at its budget
    # (the note at exit, counted per kind)
    note = re.compile(r"note: the VM's data went over \d+ of our limits \([^)]*code map (entries|bytes) [1-9]")
    builders = [(what, r) for what, r, _ in res if what.startswith((SAMPLE + " -d", SAMPLE + " --pstack", PERFMAP))]
    check(len(builders) == 3, "not the three tools that build a code map: %s" % [w for w, _ in builders])
    for what, r in builders:
        check(note.search(r.err), "%s: the code map's budget was not reported" % what, r.describe())


def test_synthetic_discovery_worst_case():
    """A stripped-looking JIT VM whose data is full of candidates for the
    JIT descriptor, each with a 100,000-link chain: discovery gives up
    within its budget, says so, and the tools end with one line."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"), emu=True)
    with Fixture(exe, "discover") as fx:
        for name, args in all_tools(fx.pid):
            r, rss = measured(name, *(["-v"] + args), timeout=60)
            what = "%s %s (discovery's worst case)" % (name, args[0])
            limit_s, limit_kb = 10 * time_scale(), 200 * 1024 * time_scale()
            check(within_time(r, 10), "%s: took %.1f s, %s s of CPU (limit %.0f s of CPU)" %
                  (what, r.elapsed, r.cpu_s, limit_s), r.describe())
            check(rss < limit_kb, "%s: RSS %d KB (limit %d KB)" % (what, rss, limit_kb), r.describe())
            check("limit: discovery effort" in r.err, "%s: the discovery budget was not reported (-v)" % what,
                  r.describe())
            if name == PERFMAP:  # and without -v: one line
                r2, _ = measured(name, *args, timeout=60)
                one_line_failure(r2, 0, what, limit_s=10)
        log("discovery's worst case: %s; %s %.1f s, %d MB" % (
            [l for l in r.err.splitlines() if "discovery effort" in l][0], name, r.elapsed, rss // 1024))


def test_allocator_search_bounded():
    """A beam that does not name erts_allctrs_info, its data full of arrays
    that look like it up to their last entry (fakebeam 'allocbait': each
    candidate a read per entry before it fails, 8 MiB of them): the search
    of erlang-heapsample --alloc gives up within its budget of reads, says
    so (-v), and the tool ends with one line naming the problem and the
    fix.  A real VM's search takes ~60 reads (OTP 29, stripped)."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    with Fixture(exe, "jit", "allocbait") as fx:
        r, rss = measured(HEAP, "-v", "-v", "--alloc", fx.pid, timeout=120)
        what = "erlang-heapsample --alloc (allocator table bait)"
        m = re.search(r"allocator table search: nothing after (\d+) reads", r.err)
        check(m, "%s: no account of the search (-v -v)" % what, r.describe())
        reads = int(m.group(1))
        check(reads <= 100001 + 64, "%s: %d reads, past the budget of 100,000" % (what, reads), r.describe())
        check("limit: discovery effort" in r.err, "%s: the budget was not reported (-v)" % what, r.describe())
        check(within_time(r, 10), "%s: took %.1f s, %s s of CPU" % (what, r.elapsed, r.cpu_s), r.describe())
        r2, rss2 = measured(HEAP, "--alloc", fx.pid, timeout=120)
        one_line_failure(r2, rss2, what, limit_s=10)
        check(r2.rc == 1 and "gave up after 100000 reads" in r2.err and "debug symbols" in r2.err,
              "%s: not the error that names the search and the fix" % what, r2.describe())
        log("allocator table bait: %d reads; %s" % (reads, r2.err.strip()))


def test_synthetic_random_reads():
    """Random bytes in every read of the VM's memory: no crash, no hang,
    no frame that is not the VM's."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"))
    synthetic_case(exe, "jit", "ok", env={"EXTROSPECT_FAULT": "random"})
    exe2 = build_fixture(os.path.join(d, "vm2"), emu=True)
    synthetic_case(exe2, "emu", "ok", env={"EXTROSPECT_FAULT": "random"})


# ---------------------------------------------------------------------------
# a real VM, its reads corrupted

MFA = re.compile(r"^[^\s:;]+:[^\s;]+/\d+$")


def corrupted_run(target, seconds):
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        vm.eval("xb_deep:start()")
        wait_running(vm, "xb_split")
        wait_running(vm, "xb_deep")
        env = {"EXTROSPECT_FAULT": "flip:10"}  # 1 % of reads
        names, map_names = set(), set()
        t_end = time.monotonic() + seconds
        runs = heap_runs = map_runs = 0
        mp = os.path.join(tmpdir(), "m")

        def perf_map():
            """One erlang-write-perf-map run with corrupted reads: exit 0
            or 1, never a crash; a map written adds its Erlang names."""
            nonlocal map_runs
            if os.path.exists(mp):
                os.unlink(mp)
            r = run_tool(PERFMAP, "-o", mp, str(vm.pid), env=env, timeout=60)
            check(r.rc in (0, 1), "erlang-write-perf-map with corrupted reads: exit %s" % r.rc, r.describe())
            if r.rc == 0:
                map_names.update(name for _, _, name in read_perf_map(mp) if MFA.match(name))
                map_runs += 1
        while time.monotonic() < t_end:
            for args in (["-d", "3"], ["--pstack"], ["--format", "folded", "-d", "2"]):
                r = run_tool(SAMPLE, *(args + [str(vm.pid)]), timeout=60, env=env)
                check(r.rc is not None and 0 <= r.rc <= 1 and not r.timed_out,
                      "erlang-sample %s with corrupted reads: exit %s" % (args[0], r.rc), r.describe())
                if args[0] == "--format":
                    for line in r.out.splitlines():
                        for fr in line.rsplit(" ", 1)[0].split(";"):
                            if re.match(r"^\S+:\S+/\d+$", fr):
                                names.add(fr)
                else:
                    names |= printed_erlang_frames(r.out)
                runs += 1
            perf_map()
            # erlang-heapsample reads processes, allocators and a heap
            # from the same corrupted memory: an error or a row marked
            # partial, never a crash or a hang.
            for args in ([], ["--alloc"], ["--contents", "xb_deep"]):
                r = run_tool(HEAP, *(args + [str(vm.pid)]), timeout=60, env=env)
                check(r.rc in (0, 1) and not r.timed_out, "erlang-heapsample %s with corrupted reads: exit %s"
                      % (heap_mode(args), r.rc), r.describe())
                heap_runs += 1
        # A map run fails (exit 1) when a flipped read spoils a table it
        # cannot do without; under the sanitizers on a saturated machine
        # the loop above may get through only one round: a few more tries
        # (each 1 % of reads flipped) before a map with names is required.
        for _ in range(8):
            if map_runs and map_names:
                break
            perf_map()
        # (the JIT's own code, erts_beamasm:normal_exit/0 ..., included: a
        # flipped read of beam_normal_exit lets a walk go one frame past
        # the end, and that frame is real JIT code, named from the VM's
        # tables; loaded_functions takes them from a clean map)
        loaded = loaded_functions(vm, {n.split(" (")[0] for n in names})
        # (with nothing named the check below would hold on nothing: 1 %
        # of reads flipped leaves most samples and their frames intact)
        check(len(names) >= 5, "only %d distinct Erlang frames named in %d runs with 1 %% of reads "
              "flipped: %s" % (len(names), runs, sorted(names)))
        # Frames are named from the code map, built from the VM's own
        # tables: a corrupted read may drop names, never invent one.
        bad = sorted(n for n in names if n.split(" (")[0] not in loaded)
        check(not bad, "frames that name no loaded function: %s" % bad[:10])
        # The perf maps written from the same corrupted reads: every
        # Erlang name in them is one a clean map of the VM has (or a loaded
        # function): a flipped read drops lines, never invents a name.
        clean = os.path.join(tmpdir(), "clean.map")
        r = run_tool(PERFMAP, "-o", clean, str(vm.pid), timeout=60)
        check(r.rc == 0, "erlang-write-perf-map without faults failed", r.describe())
        known = {name for _, _, name in read_perf_map(clean) if MFA.match(name)}
        check(map_runs >= 1 and (map_names or not known), "%d perf maps written with corrupted reads, %d names"
              % (map_runs, len(map_names)))
        odd = sorted(map_names - known - loaded_functions(vm, map_names - known)) if map_names - known else []
        # A flipped bit in the text of a name (the JIT's registration
        # entries hold names as text, with no checksum to check them by)
        # shows as that name with one character changed: seen once,
        # file:gval_stream2/6 for file:eval_stream2/6.  What must never
        # happen is a name the reads put together wrongly: another
        # function's name, or a name made up of pieces.
        by_len = {}
        for k in known:
            by_len.setdefault(len(k), []).append(k)
        # (a byte flipped to a control or non-ASCII byte is written
        # escaped, \xNN, xb_display_name_buf: one character again here;
        # seen: erts_c\x7fde_purger:check_proc_code/4 under the sanitizers)
        def one_char(n):
            return re.sub(r"\\x[0-9a-fA-F]{2}", "\0", n)
        invented = [n for n in odd
                    if not any(sum(a != b for a, b in zip(one_char(n), k)) == 1
                               for k in by_len.get(len(one_char(n)), []))]
        check(not invented, "perf map lines that name no function of the VM: %s" % invented[:10])
        if odd:
            log("names with one character flipped (the text read, not the structure): %s" % odd[:5])
        log("%d runs of erlang-sample, %d of erlang-heapsample and %d perf maps (%d Erlang names, none "
            "invented) over %d s, 1 %% of reads flipped: %d distinct Erlang frames, all loaded functions"
            % (runs, heap_runs, map_runs, len(map_names), seconds, len(names)))


@per_vm(only=["stock"])
@timeout(120)
@asan("corrupted reads of a real VM")
def test_corrupted_reads_real_vm(target):
    corrupted_run(target, 14)


@per_vm(only=["stock", "otp25-emu-dwarf"])
@suite("fuzz")
@timeout(300)
def test_corrupted_reads_real_vm_long(target):
    corrupted_run(target, 60)


# ---------------------------------------------------------------------------
# options

# Every numeric option of every tool (tests/README: table-driven).
NUMERIC = {
    SAMPLE: ["duration", "frequency", "period", "user-stack", "wakeup", "top", "max-callchain-depth",
             "live-interval", "live-window", "max-skid-ms", "pstack-wait", "drain-ms", "long-calls-ms",
             "wall-max-processes"],
    PERFMAP: ["interval"],
    "erlang-heapsample": ["interval", "count", "top", "max-words", "seed"],
}
BAD_VALUES = ["-1", "nan", "NaN", "inf", "-inf", "1e999", "4294967296", "4294967808", "18446744073709551616",
              "99999999999999999999999", "1x", "0x10", " 5", "5 ", "", "1,5", "+3"]
# values in range for an option with a wider range, and what is just past it instead
WIDE = {"period": ("4294967296", "4294967808", "1000000000000001"),
        "top": ("4294967296", "4294967808", "1000000000001"),
        "max-words": ("4294967296", "4294967808", "1000000000001"),
        "seed": ("4294967296", "4294967808", "18446744073709551616")}


NUMERIC_METAVARS = {"N", "MS", "SECONDS", "HZ", "BYTES"}


def test_bad_numeric_options():
    """Every numeric option refuses wrap-around, nan, inf, negatives and
    junk: exit 2, one line naming the option.  "Every" is checked: the
    options whose --help argument is a number (N, MS, SECONDS, HZ,
    BYTES) are the ones listed here, so a new one cannot be left out."""
    for tool, opts in NUMERIC.items():
        h = run_tool(tool, "--help", timeout=10)
        listed = set(re.findall(r"^\s+(?:-\w, )?--([a-z-]+)[ =]([A-Z]+)\b", h.out, re.M))
        numeric = {o for o, mv in listed if mv in NUMERIC_METAVARS}
        check(numeric, "%s --help lists no numeric option" % tool, h.out)
        check(numeric == set(opts), "%s: numeric options in --help %s, in this test %s"
              % (tool, sorted(numeric), sorted(opts)), h.out)
    runs = []
    for tool, opts in NUMERIC.items():
        for opt in opts:
            values = [v for v in BAD_VALUES if v not in WIDE.get(opt, ())[:-1]] + list(WIDE.get(opt, ())[-1:])
            for k, v in enumerate(values):
                # the sanitized pass (each run 180 ms of a process's start
                # and LeakSanitizer's exit) takes every third value of each
                # option, a different third for the next option, so that
                # every bad value meets the sanitizers on a third of the
                # options, in both forms alternately: the plain pass runs
                # every value in both forms
                j = len(runs)
                if sanitized():
                    if (k + len(opt)) % 3:
                        continue
                    forms = [["--%s" % opt, v] if j % 2 else ["--%s=%s" % (opt, v)]]
                else:
                    forms = [["--%s" % opt, v], ["--%s=%s" % (opt, v)]]
                for form in forms:
                    runs.append((tool, opt, form))

    def one(run):
        tool, opt, form = run
        r = run_tool(tool, *(form + ["1"]), timeout=10 * time_scale())
        lines = [l for l in r.err.splitlines() if l.strip()]
        what = "%s %s" % (tool, " ".join(repr(a) for a in form))
        check(r.rc == 2, "%s: exit %s, expected 2" % (what, r.rc), r.describe())
        check(len(lines) == 1 and opt in lines[0], "%s: expected one line naming --%s" % (what, opt),
              r.describe())

    # four at a time: hundreds of short runs, each mostly the start and
    # exit of a process (180 ms apiece in the sanitizer build)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for f in [pool.submit(one, run) for run in runs]:
            f.result()
    log("%d bad option values refused with exit 2 and one line" % len(runs))


# ---------------------------------------------------------------------------
# signals, exits, privileges

def handlers_installed(pid, sigs=(signal.SIGINT, signal.SIGTERM)):
    """Whether process PID catches every one of SIGS now (the SigCgt mask
    of /proc/PID/status); False once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            mask = next(int(l.split()[1], 16) for l in f if l.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return all(mask & (1 << (s - 1)) for s in sigs)


def wait_for_handlers(p, what):
    """Wait until P catches ^C and SIGTERM: a signal that lands before main
    has run (exec, the dynamic loader, the sanitizer runtime's start: 50 ms
    and more on a loaded machine) meets the default action, which says
    nothing about the tool.  (A run that is over has put the default
    actions back to end the usual way while it writes: then this waits for
    its end, and the caller judges its exit.)  Seconds waited; the test
    fails if P neither installs them nor ends within 10 s (scaled)."""
    t0 = time.monotonic()
    while not handlers_installed(p.pid) and p.poll() is None:
        check(time.monotonic() - t0 < 10 * time_scale(), "%s: no handler for ^C and SIGTERM after 10 s" % what)
        time.sleep(0.002)
    return time.monotonic() - t0


def heap_mode(args):
    """An erlang-heapsample mode by its arguments, for messages."""
    return " ".join(args) or "(processes)"


def signal_and_wait(p, sig, what):
    """Send SIG to P and wait for it to end (5 s at most, then the test
    fails): (seconds from the signal to its end, stdout, stderr)."""
    t0 = time.monotonic()
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        check(False, "%s: still running 5 s after %s" % (what, sig.name))
    return time.monotonic() - t0, out, err


@alone("measures the tool's reaction to a signal in milliseconds")
def test_sigint_within_100ms():
    """^C and SIGTERM (alternately) end the tool within 100 ms while it
    reads a huge code table, while it samples, while it walks a 64 GiB
    stack, and ("anywhere", the promise says) during --check and during discovery
    of a stripped VM's tables (the fixture's worst case: about 2 s of
    candidates, so the signal lands in it), in erlang-heapsample too;
    interrupted before sampling, with one line."""
    d = tmpdir()
    emu = build_fixture(os.path.join(d, "emu"), emu=True)
    jit = build_fixture(os.path.join(d, "jit"))
    worst, waited = [], []
    # (the perf map's -o in a directory of its own: what is left there is
    # the tool's)
    odir = os.path.join(d, "out")
    os.mkdir(odir)
    mpath = os.path.join(odir, "m")
    sample_tools = ((SAMPLE, ["-d", "30"]), (SAMPLE, ["--pstack", "--pstack-wait", "30"]),
                    (PERFMAP, ["-o", mpath, "--watch", "--interval", "100"]))
    discovery_tools = ((SAMPLE, ["-d", "30"]), (SAMPLE, ["--check"]), (PERFMAP, ["-o", mpath]),
                       (HEAP, ["--alloc"]))
    for exe, fx_args, tools, delays in (
            (emu, ("emu", "modules"), sample_tools + ((SAMPLE, ["--check"]),), (0.05, 0.15, 0.3, 1.5)),
            (jit, ("jit", "heap64g"), sample_tools, (0.3, 1.0)),
            (emu, ("discover",), discovery_tools, (0.3, 1.0))):
        mode, case = fx_args[0], (fx_args[1:] or ("",))[0]
        with Fixture(exe, *fx_args) as fx:
            for tool, args in tools:
                for i, delay in enumerate(delays):
                    sig = signal.SIGTERM if i % 2 else signal.SIGINT
                    if os.path.exists(mpath):
                        os.unlink(mpath)
                    p = subprocess.Popen([tool_path(tool)] + args + [str(fx.pid)], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
                    time.sleep(delay)
                    what = "%s %s (%s %s)" % (tool, args[0], mode, case)
                    waited.append(wait_for_handlers(p, what))
                    took, out, err = signal_and_wait(p, sig, what)
                    worst.append((took, tool, args[0], mode, case, delay, sig.name))
                    text = err.decode(errors="replace")
                    check(p.returncode in (0, 1, 130) and p.returncode >= 0, "%s %s: exit %s after %s" %
                          (tool, args[0], p.returncode, sig.name), text)
                    if p.returncode == 130:
                        # interrupted while attaching: one line, no file
                        lines = [l for l in text.splitlines() if l.strip() and not re.match(r"(erlang-[a-z-]+: )?note:", l)]
                        check(len(lines) == 1 and "interrupted" in lines[0],
                              "%s %s: exit 130 after %s, stderr %r" % (tool, args[0], sig.name, lines))
                        check(not os.path.exists(mpath), "%s %s: exit 130 after %s, and it wrote %s"
                              % (tool, args[0], sig.name, mpath))
                    # (-o FILE is written in full, then renamed: no
                    # temporary file is left behind, however it ended)
                    left = sorted(set(os.listdir(odir)) - {"m"})
                    check(not left, "%s %s: %r left beside -o FILE after %s (exit %s)"
                          % (tool, args[0], left, sig.name, p.returncode))
    worst.sort(reverse=True)
    log("signals sent after the delay plus up to %.0f ms waiting for the handlers (%d of %d runs waited > 5 ms)" % (
        max(waited) * 1000, sum(1 for w in waited if w > 0.005), len(waited)))
    # Each tool catches the signals from its start (exec and the dynamic
    # loader take tens of ms, more on a loaded machine), not once it has
    # attached: erlang-heapsample did so only after discovery, 1.5 s into
    # the stripped fixture, and a ^C meanwhile ended it silently.
    check(max(waited) < 0.5 * time_scale(), "a tool caught ^C and SIGTERM only %.0f ms after its start"
          % (max(waited) * 1000))
    log("slowest exits after ^C or SIGTERM: %s" % "; ".join("%.0f ms (%s %s, %s %s, %s after %.2f s)" % (
        w[0] * 1000, w[1], w[2], w[3], w[4], w[6], w[5]) for w in worst[:3]))
    # 100 ms for the tools as shipped.  The sanitized build's exit runs
    # LeakSanitizer's scan of the heap after the tool is done, which on a
    # saturated machine took it to 361 ms once (tests/soak-saturated.sh):
    # the sanitizer pass is about memory safety on these paths, so its
    # bound is 0.5 s, and the plain pass holds the 100 ms.
    limit = 0.5 if sanitized() else 0.1
    check(worst[0][0] < limit, "%s %s took %.0f ms to honour %s (%s %s after %.2f s; limit %.0f ms)" %
          (worst[0][1], worst[0][2], worst[0][0] * 1000, worst[0][6], worst[0][3], worst[0][4], worst[0][5],
           limit * 1000))


@alone("measures the tool's reaction to ^C in milliseconds and its share of a CPU")
def test_many_mappings():
    """A VM with as many mappings as the kernel allows (fakebeam
    'manymaps': 65,530 by default, none mergeable): erlang-sample attaches,
    takes samples, spends a small share of a CPU re-reading the maps, and
    ends within 100 ms of ^C with its results.  (Parsed with a sscanf over
    the rest of the text, 64k mappings took 3 s each time: no sample in the
    first seconds, and ^C waited for the parse.)"""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "many"))
    with Fixture(exe, "jit", "manymaps") as fx:
        with open("/proc/%d/maps" % fx.pid) as f:
            nmaps = sum(1 for _ in f)
        log("the fixture has %d mappings" % nmaps)
        check(nmaps >= 60000, "the fixture has only %d mappings (vm.max_map_count is %s; the test needs 60,000)"
              % (nmaps, open("/proc/sys/vm/max_map_count").read().strip()))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.Popen([tool_path(SAMPLE), "-d", "60", str(fx.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        t0 = time.monotonic()
        wait_for_handlers(p, "erlang-sample (manymaps)")
        time.sleep(max(0.0, 3.0 * time_scale() - (time.monotonic() - t0)))
        took, out, err = signal_and_wait(p, signal.SIGINT, "erlang-sample (manymaps)")
        elapsed = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
        log("^C honoured in %.0f ms; %.2f s of CPU in %.2f s; %s" % (
            took * 1000, cpu, elapsed, (out.splitlines() or ["no output"])[0]))
        for t in CRASH:
            check(t not in err, "erlang-sample crashed: %r" % t, err)
        check(p.returncode == 0, "erlang-sample exit %s after ^C (it should have been sampling)" % p.returncode,
              err)
        processed, _, rows = parse_table(out)
        check(processed >= 50 and any(r[1] == "fake:spin/0" for r in rows),
              "%d samples in %.1f s, or not of fake:spin/0" % (processed, elapsed), out[:500])
        # (the sanitized build's exit runs LeakSanitizer's scan: see
        # test_sigint_within_100ms)
        limit = 0.5 if sanitized() else 0.1
        check(took < limit, "^C took %.0f ms (limit %.0f ms)" % (took * 1000, limit * 1000))
        # re-reading 64k mappings every 250 ms with a quadratic parser was
        # all of a CPU; now a few per cent (the maps are re-read at most
        # every 10 times what a read costs, and parsed only when changed)
        check(cpu < 0.3 * elapsed * time_scale(), "erlang-sample used %.2f s of CPU in %.2f s" % (cpu, elapsed))


@asan("a loop in 200 processes' link trees: the walk's budgets")
def test_link_tree_loop_bounded():
    """200 processes whose link tree loops (fakebeam 'linkloop': a node that
    is its own left and right child), one whose signal queue loops and
    one whose message's fragment chain does: erlang-heapsample ends in seconds,
    within bounded memory, with each of the 200 rows marked partial and
    <0.5.0> (no links) not.  The walk reads a batch's trees a level at a
    time: a loop doubles each level, and only the per-process bound (a
    million nodes) stopped it, 200 million nodes for the batch (over 60 s,
    growing to gigabytes: found by a review); a level now holds at most a
    million nodes and a batch reads at most four million."""
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    with Fixture(exe, "jit", "linkloop") as fx:
        r, rss = measured(HEAP, "--format", "json", "-t", "0", fx.pid, timeout=120)
        check(r.rc == 0 and within_time(r, 10), "erlang-heapsample on looping link trees: exit %s after %.1f s "
              "(%s s of CPU)" % (r.rc, r.elapsed, r.cpu_s), r.describe())
        # a level of a million nodes: some 180 MB of requests and
        # buffers at most (119 MB seen); the sanitizer's shadow and
        # quarantine double it
        limit_kb = 300 * 1024 * (2 if sanitized() else 1)
        check(rss < limit_kb, "erlang-heapsample on looping link trees: peak RSS %d KB (limit %d)" % (rss, limit_kb))
        rows = {x["pid"]: x for x in json.loads(r.out)}
        looped = ["<0.%d.0>" % s for s in range(8, 208)]
        missing = [p for p in looped if p not in rows]
        check(not missing, "%d of the 200 processes not shown, e.g. %s" % (len(missing), missing[:3]), r.out[:1000])
        unmarked = [p for p in looped if rows[p]["partial"] is not True]
        check(not unmarked, "%d rows of looping trees not marked partial, e.g. %s" % (len(unmarked), unmarked[:3]))
        check("<0.5.0>" in rows and rows["<0.5.0>"]["partial"] is False and rows["<0.5.0>"]["links"] == 0,
              "<0.5.0> (no links) not shown as it is", r.out[:1000])
        # a signal that is its own next (not a message: the bound on
        # messages never met it, and the tool never ended, deaf to ^C)
        # and a message whose fragment chain loops: seen as loops
        for pid, what in (("<0.300.0>", "signal queue"), ("<0.301.0>", "message fragment chain")):
            check(pid in rows and rows[pid]["partial"] is True, "%s (its %s loops) not marked partial" % (pid, what),
                  r.out[:1000])
        check(rows["<0.301.0>"]["message_queue_len"] == 1, "<0.301.0>: %d messages, 1 queued"
              % rows["<0.301.0>"]["message_queue_len"])
        log("200 looping link trees: %.1f s (%.1f s of CPU), %d MB, every row marked partial (links counted "
            "%d..%d)" % (r.elapsed, r.cpu_s, rss // 1024, min(rows[p]["links"] for p in looped),
                         max(rows[p]["links"] for p in looped)))


def test_signal_after_the_failure_is_said():
    """A tool that has failed and said so ends with that one line and its
    exit status (1) when ^C or SIGTERM comes while it tears down; it used
    to add "interrupted; nothing written" and exit 130 (seen once in the
    sanitized build, whose leak scan at exit is slow: the signal of
    test_sigint_within_100ms landed after a failure).  strace holds each
    tool in the write of its line for 400 ms (inject delay_exit) and the
    signal comes then, so the race is there every run: the tool must let
    the line be written, then end with exit 1 and nothing more."""
    strace = shutil.which("strace")
    if not strace:
        skip_because("needs-package", None, "strace")
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    seen = []
    with Fixture(exe, "idle") as fx:
        for i, tool in enumerate((SAMPLE, HEAP, PERFMAP)):
            sig = signal.SIGTERM if i % 2 else signal.SIGINT
            args = ["-o", os.path.join(tmpdir(), "never.map")] if tool == PERFMAP else []
            p = subprocess.Popen([strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace=write", "-e",
                                  "inject=write:delay_exit=400000", tool_path(tool)] + args + [str(fx.pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            first = p.stderr.readline().decode(errors="replace")
            kids = []
            try:
                with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                    kids = f.read().split()
            except OSError:
                pass
            check(kids and first.strip(), "%s under strace: no failure line, or gone at once (%r)" % (tool, first))
            t0 = time.monotonic()
            os.kill(int(kids[0]), sig)
            out, rest = p.communicate(timeout=30)
            held = time.monotonic() - t0
            rest = rest.decode(errors="replace")
            lines = [l for l in (first + rest).splitlines() if l.strip()]
            check(p.returncode == 1 and len(lines) == 1,
                  "%s: %s while its failure line was being written: exit %s, stderr %r (want exit 1 and "
                  "that line alone)" % (tool, sig.name, p.returncode, lines))
            check(not os.path.exists(os.path.join(tmpdir(), "never.map")), "%s: wrote a perf map" % tool)
            seen.append("%s %s %.0f ms later: exit 1, %r" % (tool, sig.name, held * 1000, lines[0][:60]))
    log("; ".join(seen))


def test_heapsample_changing_processes_skipped_and_counted():
    """erlang-heapsample never prints a process that changed under its
    reads as fact: fakebeam 'changing' has <0.5.0> as it is,
    <0.6.0> caught in a garbage collection for good (ERTS_PSFLG_GC: read
    again after waiting, then skipped), and <0.7.0> whose heap a thread
    moves between two blocks of 64 words all the time.  In every run
    <0.6.0> is not shown and is counted ("changed"), <0.7.0> is shown with
    a consistent heap or counted, and the rows plus the counts are the
    three processes."""
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    seen7 = 0
    with Fixture(exe, "jit", "changing") as fx:
        for _ in range(5):
            r = run_tool(HEAP, "--format", "csv", str(fx.pid), timeout=30)
            check(r.rc == 0, "erlang-heapsample on changing processes: exit %s" % r.rc, r.describe())
            rows = {l.split(",")[0]: l.split(",") for l in r.out.splitlines()[1:] if l}
            m = re.search(r"not shown: (\d+) processes changed \(garbage collected\) during both\s+reads, "
                          r"(\d+) exited while read, (\d+) unreadable", r.err)
            check(m, "no count of the processes not shown", r.err)
            changed = int(m.group(1))
            check("<0.5.0>" in rows and rows["<0.5.0>"][7] == "8192", "<0.5.0> (8192 heap words) not shown as "
                  "it is", r.out)
            check("<0.6.0>" not in rows, "<0.6.0>, in a garbage collection, shown as fact", r.out)
            if "<0.7.0>" in rows:
                seen7 += 1
                check(rows["<0.7.0>"][7] == "64", "<0.7.0> shown with %s heap words, not the 64 of either "
                      "block" % rows["<0.7.0>"][7], r.out)
            check(len(rows) + changed == 3 and changed >= 1,
                  "%d rows and %d counted as changed: not the fixture's three processes" % (len(rows), changed),
                  r.out + r.err)
    log("5 runs: <0.6.0> (mid-collection) skipped and counted every time, <0.7.0> (moving) shown consistent "
        "%d times, counted the rest" % seen7)


@alone("measures the tool's reaction to a signal in milliseconds")
def test_heapsample_sigint_within_100ms():
    """erlang-heapsample honours ^C and SIGTERM (alternately) within 100 ms
    in each of its modes (processes, --alloc, --contents, --interval),
    sent while it attaches to a VM with a huge code table, and while it
    works on a VM made to keep it busy on any machine (fakebeam
    'heapwork': 2^17 processes to read, 48 MiB of data to search for the
    allocator table, a 64 GiB heap to walk: 160-370 ms on a fast machine,
    where the other fixtures take 8-36 ms, too short to interrupt).
    Before its handlers are in place the signal's default action ends it;
    while it attaches, it ends with one line (exit 130, nothing written);
    once reading, it stops with what it read (exit 0,
    complete output; --interval: the intervals so far), or with one line
    (exit 1).  A case slower than 100 ms is tried twice more and fails
    only if it is slow every time (this machine's load delays a run now
    and then; a part of the tool that ignores the signal is slow every
    time: the allocator table's search took 205-269 ms before it checked
    for ^C)."""
    d = tmpdir()
    emu = build_fixture(os.path.join(d, "emu"), emu=True)
    jit = build_fixture(os.path.join(d, "jit"))
    modes = ([], ["--alloc"], ["--contents", "<0.5.0>"], ["--interval", "1", "--count", "30"])
    limit = 0.1 * time_scale()

    def interrupted(fx, args, delay, sig, what):
        """Seconds from the signal to the tool's end (None: it was done
        before the signal), after checking how it ended."""
        # (LeakSanitizer's scan at exit takes 150-200 ms of its own in the
        # sanitizer build: not the tool's reaction to the signal.  The rest
        # of ASan and UBSan stay on.)
        p = subprocess.Popen([tool_path(HEAP)] + args + [str(fx.pid)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True, env=untraced_leak_check())
        time.sleep(delay)
        if p.poll() is not None:
            p.communicate()
            return None
        took, out, err = signal_and_wait(p, sig, what)
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
        for t in CRASH:
            check(t not in err, "%s crashed" % what, err)
        lines = [l for l in err.splitlines() if l.strip() and "note:" not in l]
        if p.returncode == -sig:
            # the default action, before the handlers: nothing written
            check(not out, "%s: killed by the signal after writing %r" % (what, out[:300]))
        elif p.returncode == 130:
            # while attaching: one line, nothing written
            check(not out and len(lines) == 1 and "interrupted" in lines[0],
                  "%s: exit 130, stdout %r, stderr %r" % (what, out[:300], err[-500:]))
        elif p.returncode == 1:
            check(len(lines) == 1, "%s: exit 1 with %d lines on stderr" % (what, len(lines)), err)
        elif p.returncode == 2 and "--contents" in args:
            # the fakes' process table has no <0.1.0>: that answer came
            # before the signal was seen (a slower, sanitized build)
            check(len(lines) == 1 and "no process" in lines[0], "%s: exit 2, stderr %r" % (what, err[-500:]))
        else:
            check(p.returncode == 0 and not lines, "%s: exit %s, stderr %r" % (what, p.returncode, err[-500:]))
            check(not out or out.endswith("\n"), "%s: its output ends mid-line" % what, out[-300:])
        return took

    def runtime(fx, args):
        """How long a run takes to its end, unsignalled (capped)."""
        t0 = time.monotonic()
        try:
            subprocess.run([tool_path(HEAP)] + args + [str(fx.pid)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=3, env=untraced_leak_check())
        except subprocess.TimeoutExpired:
            pass
        return time.monotonic() - t0

    # The signal goes at a fifth, half and four fifths of the run's own
    # length (measured here, as the machine's load makes it), so that it
    # lands while the tool works however fast it is today; runs shorter
    # than 40 ms are too short to interrupt on purpose.
    times, slow, attempts, work = [], [], 0, {}
    # heapwork: a mode measured too short on one fixture is tried on a
    # fresh one (a new address-space layout), up to 3 in all: --alloc
    # measured 34 ms twice on one (a run of the whole suite, 2026-11-28),
    # 450-500 ms on others
    runs = [(emu, "emu", "modules")] + [(jit, "jit", "heapwork")] * 3
    for exe, mode, case in runs:
        todo = [a for a in modes if case != "heapwork" or heap_mode(a) not in work]
        if not todo:
            continue
        with Fixture(exe, mode, case) as fx:
            for args in todo:
                whole = min(runtime(fx, args), 3.0)
                if whole < 0.04:
                    # (once, in a run of this test alone, --alloc on
                    # heapwork measured under 40 ms where it takes 450-500
                    # ms every time since: measured again before the case
                    # counts as too short)
                    whole = max(whole, min(runtime(fx, args), 3.0))
                if whole < 0.04:
                    log("%s on %s %s: done in %.0f ms, too short to interrupt" % (heap_mode(args), mode, case,
                                                                                whole * 1000))
                    continue
                if case == "heapwork":
                    work[heap_mode(args)] = whole
                for i, delay in enumerate((0.2 * whole, 0.5 * whole, 0.8 * whole)):
                    attempts += 1
                    sig = signal.SIGTERM if i % 2 else signal.SIGINT
                    took = None
                    # Done before the signal: this run was faster than the
                    # measured one (a loaded machine's runs vary: 13 of 24
                    # still going once, with OTP being compiled beside
                    # it): twice more, each time signalled twice as early.
                    for attempt in range(3):
                        if attempt:
                            delay /= 2
                        what = "%s %s (%s %s, %s after %.2f s)" % (HEAP, heap_mode(args), mode, case, sig.name,
                                                                  delay)
                        took = interrupted(fx, args, delay, sig, what)
                        if took is not None:
                            break
                    if took is None:
                        continue
                    tries = [took]
                    while tries[-1] >= limit and len(tries) < 3:
                        again = interrupted(fx, args, delay, sig, what)
                        tries.append(limit if again is None else again)
                    times.append((min(tries), what))
                    if len(tries) > 1:
                        slow.append("%s: %s ms" % (what, "/".join("%.0f" % (t * 1000) for t in tries)))
    times.sort(reverse=True)
    log("%d runs interrupted; slowest: %s" % (len(times), "; ".join("%.0f ms (%s)" % (t * 1000, w)
                                                                     for t, w in times[:3])))
    if slow:
        log("tried again: %s" % "; ".join(slow))
    check(len(work) == len(modes), "on 'heapwork', only %s lasted 40 ms or more (of %d modes)"
          % (", ".join("%s %.0f ms" % (m, t * 1000) for m, t in work.items()) or "none", len(modes)))
    check(len(times) >= 0.6 * attempts,
          "only %d of %d runs were still going when signalled (at a fifth, half and four fifths of their "
          "own length)" % (len(times), attempts))
    check(times[0][0] < limit, "%s took %.0f ms to honour the signal, %d times in a row" %
          (times[0][1], times[0][0] * 1000, 3))


def check_results_and_note(out, err, what):
    """erlang-sample ended 0 although its VM died before the run's end:
    it printed what it gathered and a note saying the VM exited."""
    check(re.match(r"processed \d+/\d+ samples", out), "%s: exit 0 without results" % what, out[:500])
    check(re.search(r"^erlang-sample: note: VM \d+ exited after [\d.]+ s; the results above cover the time "
                    r"until then$", err, re.M), "%s: exit 0 without the note that the VM exited" % what, err)


def test_vm_exits_during_attach():
    """The VM dies at any moment of attaching and starting: the tool ends
    within 3 s with one line saying the VM exited (or, killed after it
    started, with its results and a note)."""
    d = tmpdir()
    exe = build_fixture(os.path.join(d, "vm"), emu=True)
    seen = {}
    for delay in (0.0, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3, 0.6):
        for tool, args in ((SAMPLE, ["-d", "1"]), (SAMPLE, ["--check"]), (PERFMAP, ["-o", os.path.join(d, "m")])):
            with Fixture(exe, "emu", "modules") as fx:
                p = subprocess.Popen([tool_path(tool)] + args + [str(fx.pid)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
                time.sleep(delay)
                fx.kill()
                try:
                    out, err = p.communicate(timeout=3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
                    check(False, "%s %s did not end within 3 s of the VM's death" % (tool, args[0]))
                err = err.decode(errors="replace")
                lines = [l for l in err.splitlines() if l.strip()]
                for t in CRASH:
                    check(t not in err, "%s crashed" % tool, err)
                check(p.returncode in (0, 1), "%s %s: exit %s" % (tool, args[0], p.returncode), err)
                if p.returncode == 1 and args[0] != "--check":
                    check(len(lines) == 1, "%s %s (VM killed after %.3f s): %d lines" %
                          (tool, args[0], delay, len(lines)), err)
                    check("exited" in lines[0] or "no such process" in lines[0] or "does not exist" in lines[0],
                          "%s: the line does not say the VM exited: %r" % (tool, lines[0]))
                    msg = re.sub(r"\d{3,}", "N", lines[0].split(": ", 1)[1])
                    seen[msg] = seen.get(msg, 0) + 1
                if p.returncode == 0 and args[0] == "-d":
                    # killed within 0.6 s, a 1 s run: results and the note
                    check_results_and_note(out.decode(errors="replace"), err,
                                           "%s %s (VM killed after %.3f s)" % (tool, args[0], delay))
    log("messages: %s" % "; ".join("%s (%d)" % kv for kv in sorted(seen.items())))


@per_vm(only=["otp25-jit-dwarf", "otp29-jit"])
@timeout(240)
def test_real_vm_exits_during_attach(target):
    """The same with real VMs (where a raw "process_vm_readv(...): No such
    process" once came out, on otp25-jit-dwarf): the VM killed at moments
    of attaching, reading its tables, loading the BPF program, sampling:
    exit 0 with results, or exit 1 with one line saying the VM exited."""
    seen = {}
    d = tmpdir()
    for delay in (0.0, 0.01, 0.03, 0.06, 0.12, 0.25):
        for tool, args in ((SAMPLE, ["-d", "1"]), (HEAP, []), (PERFMAP, ["-o", os.path.join(d, "m")])):
            with VM(target, schedulers=2) as vm:
                vm.eval("xb_split:start(75)")
                if tool == PERFMAP and os.path.exists(args[-1]):
                    os.unlink(args[-1])  # the last round's map proves nothing
                p = subprocess.Popen([tool_path(tool)] + args + [str(vm.pid)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
                time.sleep(delay)
                vm.kill()
                try:
                    out, err = p.communicate(timeout=5 * time_scale())
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
                    check(False, "%s %s did not end within 5 s of the VM's death" % (tool, " ".join(args)))
            err = err.decode(errors="replace")
            lines = [l for l in err.splitlines() if l.strip()]
            what = "%s %s (VM killed after %.2f s)" % (tool, " ".join(args), delay)
            for t in CRASH:
                check(t not in err, "%s crashed" % what, err)
            check(p.returncode in (0, 1), "%s: exit %s" % (what, p.returncode), err)
            if p.returncode == 1:
                check(len(lines) == 1, "%s: %d lines on stderr" % (what, len(lines)), err)
                # The tool's own words ("... exited", "no such process: PID
                # N does not exist"), never a raw system call error such as
                # "process_vm_readv(...): No such process" (the matrix once
                # saw that one).
                check(("exited" in lines[0] or "no such process: PID" in lines[0])
                      and "process_vm_readv" not in lines[0],
                      "%s: the line does not say the VM exited: %r" % (what, lines[0]))
            elif tool == SAMPLE:
                # killed within 0.25 s, a 1 s run: results and the note
                check_results_and_note(out.decode(errors="replace"), err, what)
            elif tool == HEAP:
                # what was read (process rows), or the note that the VM
                # exited before anything could be shown: never nothing
                check(re.search(r"^\s*<\d+\.\d+\.\d+>", out.decode(errors="replace"), re.M)
                      or any("note:" in l and "exited" in l for l in lines),
                      "%s: exit 0 with neither process rows nor a note that the VM exited" % what,
                      out.decode(errors="replace")[:2000] + err)
            else:
                mp = args[-1]
                check((os.path.exists(mp) and os.path.getsize(mp) > 0)
                      or any("exited" in l for l in lines),
                      "%s: exit 0 with no map written and no word that the VM exited" % what, err)
            key = "exit %d: %s" % (p.returncode, re.sub(r"\d{2,}", "N", lines[-1].split(": ", 1)[-1])
                                   if lines else "(nothing on stderr)")
            seen[key] = seen.get(key, 0) + 1
    log("outcomes: %s" % "; ".join("%s (%d)" % kv for kv in sorted(seen.items())))


VERBOSE_LINE = re.compile(r"^erlang-(sample|heapsample) \d+\.\d+\.\d+: PID \d+: |^erlang-sample: cpu: "
                          r"|received \d+, processed \d+; dropped:|^erlang-sample: reads at the moment of the sample: ")


@per_vm(only=["otp25-jit-dwarf", "otp29-jit"])
@timeout(300)
@asan("a VM exiting while --pstack, --alloc or --contents reads it")
def test_real_vm_exits_mid_read(target):
    """--pstack, erlang-heapsample --alloc and --contents, with -v: the VM
    killed 0.1 s after the tool started (attaching, on this machine) and
    0, 10 and 30 ms after its start line (attached: reading): exit 0 with
    what was gathered on stdout or a note that the VM exited, or exit 1
    with one line saying the VM exited (beside -v's own lines); within 5 s,
    no crash.  Some run must have seen the VM exit after its start line
    (mid-read), or the test tested nothing (--alloc reads for ~30 ms after
    it and usually completes: the dying VM's memory stays readable while
    the kernel tears it down)."""
    seen, mid_read = {}, []
    for tool, args in ((SAMPLE, ["--pstack", "--pstack-wait", "2"]), (HEAP, ["--alloc"]),
                       (HEAP, ["--contents", "xb_deep"])):
        mode = "%s %s" % (tool, " ".join(args))
        for after_start, delay in ((False, 0.1), (True, 0.0), (True, 0.01), (True, 0.03)):
            with VM(target, schedulers=2) as vm:
                vm.eval("xb_split:start(75)")
                vm.eval("xb_deep:start()")
                wait_running(vm, "xb_deep")
                outpath = os.path.join(tmpdir(), "midread.out")
                with open(outpath, "wb") as outf:
                    p = subprocess.Popen([tool_path(tool), "-v"] + args + [str(vm.pid)], stdout=outf,
                                         stderr=subprocess.PIPE, start_new_session=True)
                err_lines, started = [], threading.Event()

                def read_err():
                    for raw in p.stderr:
                        line = raw.decode(errors="replace").rstrip("\n")
                        err_lines.append(line)
                        if line.startswith(tool + " ") and ": PID " in line:
                            started.set()
                reader = threading.Thread(target=read_err, daemon=True)
                reader.start()
                if after_start:
                    check(wait_for(lambda: started.is_set() or p.poll() is not None, 30 * time_scale(), 0.002),
                          "%s: no start line within 30 s" % mode, "\n".join(err_lines))
                time.sleep(delay)
                was_started = started.is_set()
                os.kill(vm.pid, signal.SIGKILL)  # at once (vm.kill() waits for the group)
                vm.kill()
                try:
                    p.wait(timeout=5 * time_scale())
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    check(False, "%s did not end within 5 s of the VM's death" % mode)
                reader.join(5)
            with open(outpath, errors="replace") as f:
                out = f.read()
            err = "\n".join(err_lines)
            what = "%s (VM killed %.0f ms after %s)" % (mode, delay * 1000,
                                                       "its start line" if after_start else "it started")
            for t in CRASH:
                check(t not in err, "%s crashed" % what, err)
            lines = [l for l in err_lines if l.strip() and not VERBOSE_LINE.search(l)]
            exited = [l for l in lines if ("exited" in l or "no such process: PID" in l)
                      and "process_vm_readv" not in l]
            if p.returncode == 1:
                check(len(lines) == 1 and exited, "%s: exit 1 without one line saying the VM exited" % what, err)
            else:
                check(p.returncode == 0, "%s: exit %s" % (what, p.returncode), err)
                check(all("note:" in l for l in lines), "%s: exit 0 with stderr lines that are not notes: %r"
                      % (what, [l for l in lines if "note:" not in l]))
                check(out.strip() or exited, "%s: exit 0, nothing gathered and no note that the VM exited" % what,
                      err)
                check(not out or out.endswith("\n"), "%s: output ends mid-line" % what, out[-300:])
            if exited and was_started:
                mid_read.append(what)
            key = "%s: exit %d, %s" % (mode, p.returncode, re.sub(r"\d{2,}", "N", exited[0].split(": ", 1)[-1])
                                       if exited else "completed (%d lines)" % len(out.splitlines()))
            seen[key] = seen.get(key, 0) + 1
    log("outcomes: %s" % "; ".join("%s (%d)" % kv for kv in sorted(seen.items())))
    check(mid_read, "no run saw the VM exit after its start line")
    log("the VM's exit seen mid-read: %s" % "; ".join(mid_read))


def test_environment_read_with_secure_getenv():
    """Every environment variable the tools read (the EXTROSPECT_* test
    knobs, DEBUGINFOD_URLS) is read with secure_getenv, which returns
    nothing in a process with file capabilities: a user cannot steer a
    capability-holding tool (EXTROSPECT_FAULT corrupting its reads,
    DEBUGINFOD_URLS pointing it at a server of theirs).  The end-to-end
    check with setcap is test_file_capabilities_refuse_other_users
    (EXTROSPECT_FORCE_RELEASE); this one covers every knob: no plain
    getenv() anywhere in src/, and each knob the README names is read."""
    plain, knobs = [], set()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            text = open(path, encoding="utf-8", errors="replace").read()
            for m in re.finditer(r"(?<![\w])(secure_)?getenv\s*\(\s*\"([A-Z_]+)\"", text):
                if m.group(1):
                    knobs.add(m.group(2))
                else:
                    plain.append("%s: getenv(\"%s\")" % (os.path.relpath(path, ROOT), m.group(2)))
            for m in re.finditer(r"(?<![\w])getenv\s*\(", text):
                line = text.count("\n", 0, m.start()) + 1
                if not text[max(0, m.start() - 7):m.start()].endswith("secure_"):
                    plain.append("%s:%d: getenv(" % (os.path.relpath(path, ROOT), line))
    check(not plain, "plain getenv() in src/: %s" % sorted(set(plain)))
    want = {"EXTROSPECT_FAULT", "EXTROSPECT_CAPTURE", "EXTROSPECT_FORCE_RELEASE", "DEBUGINFOD_URLS"}
    check(knobs >= want, "knobs read with secure_getenv: %s; missing %s" % (sorted(knobs), sorted(want - knobs)))
    log("read with secure_getenv: %s" % ", ".join(sorted(knobs)))


def test_file_capabilities_refuse_other_users():
    """Installed with file capabilities instead of run as root: a process
    of another user is refused, one of the invoking user is read; test
    knobs (EXTROSPECT_*) are ignored (secure_getenv).  README: refused
    too when only the saved uid or gid differs, or the process is not
    dumpable."""
    if not shutil.which("setcap") or not shutil.which("setpriv"):
        skip_because("needs-package", None, "setcap (libcap2-bin) and setpriv (util-linux)")
    d = tmpdir()
    os.chmod(d, 0o755)
    tool = os.path.join(d, "erlang-sample")
    shutil.copy(tool_path(SAMPLE), tool)
    os.chmod(tool, 0o755)
    r = run_cmd(["setcap", "cap_sys_ptrace,cap_perfmon+ep", tool], timeout=10)
    if r.rc != 0:
        skip("setcap failed here: %s" % r.err.strip())
    exe = build_fixture(os.path.join(d, "vm"))
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
    with Fixture(exe, "jit", "ok") as root_vm:
        r = run_cmd(nobody + [tool, "--check", str(root_vm.pid)], timeout=20)
        lines = [l for l in r.err.splitlines() if l.strip()]
        check(r.rc != 0 and any("refusing process %d" % root_vm.pid in l for l in lines + r.out.splitlines()),
              "root's process was not refused with file capabilities", r.describe() + r.out)
        log((lines or r.out.splitlines())[-1])
    with Fixture(exe, "jit", "ok", user=65534) as own:
        r = run_cmd(nobody + [tool, "--check", str(own.pid)], timeout=20,
                    env=dict(os.environ, EXTROSPECT_FORCE_RELEASE="15.2.7"))
        check("refusing" not in r.out + r.err, "the invoking user's own process was refused", r.describe())
        check("the table of this release (erts 13.1.5)" in r.out, "EXTROSPECT_FORCE_RELEASE was obeyed with file capabilities",
              r.out + r.err)
        log("own process: " + r.out.splitlines()[0])
    # The kernel's whole rule, one id at a time: a process of user nobody
    # whose saved uid (or saved gid) is root's, or that is not dumpable,
    # is refused; the same process with every id nobody's and dumpable is
    # let through to the next check (it is not a BEAM: python).
    cases = [("every id nobody's, dumpable", (65534, 65534, 65534), (65534, 65534, 65534), 1, False),
             ("saved uid root's", (65534, 65534, 65534), (65534, 65534, 0), 1, True),
             ("saved gid root's", (65534, 65534, 0), (65534, 65534, 65534), 1, True),
             ("not dumpable", (65534, 65534, 65534), (65534, 65534, 65534), 0, True)]
    for what, gids, uids, dumpable, refused in cases:
        code = ("import ctypes, os, sys, time\n"
                "os.setgroups([]); os.setresgid(*%r); os.setresuid(*%r)\n"
                "assert ctypes.CDLL(None, use_errno=True).prctl(4, %d, 0, 0, 0) == 0\n"
                "print('ready', flush=True); time.sleep(60)\n" % (gids, uids, dumpable))
        sleeper = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
        try:
            check(sleeper.stdout.readline().strip() == b"ready", "%s: the sleeper did not start" % what)
            with open("/proc/%d/status" % sleeper.pid) as f:
                ids = [l.strip() for l in f if l.startswith(("Uid:", "Gid:"))]
            r = run_cmd(nobody + [tool, "-d", "1", str(sleeper.pid)], timeout=20)
            lines = [l for l in r.err.splitlines() if l.strip()]
            said = "refusing process %d" % sleeper.pid
            log("%s (%s): %s" % (what, "; ".join(ids), lines[-1] if lines else "(nothing)"))
            check(r.rc != 0 and len(lines) == 1, "%s: exit %s, %d lines" % (what, r.rc, len(lines)), r.describe())
            if refused:
                # the refusal names the ids (real/effective/saved) and says when not dumpable
                names = "uids are %d/%d/%d, gids %d/%d/%d" % (uids + gids)
                check(said in lines[0], "%s: not refused with file capabilities" % what, r.describe())
                check(names in lines[0] and (dumpable or "not dumpable" in lines[0]),
                      "%s: the refusal does not say why (%s%s)" % (what, names, "" if dumpable else ", not dumpable"),
                      r.describe())
            else:
                check(said not in lines[0] and "not a BEAM" in lines[0],
                      "%s: refused, or not told it is not a BEAM" % what, r.describe())
        finally:
            sleeper.kill()
            sleeper.wait()


def dwarf_patched_target(target, name, struct, member, value):
    """A copy of TARGET (a DWARF build) whose beam's .debug_info gives
    STRUCT's MEMBER (MEMBER "": the struct's size) VALUE in every
    compilation unit (tests/tools/dwarf_patch_member.c, built here)."""
    patcher = os.path.join(tmpdir(), "dwarf_patch_member")
    if not os.path.exists(patcher):
        r = run_cmd(["gcc", "-O1", "-Wall", "-Wextra", "-Werror", "-o", patcher,
                     os.path.join(ROOT, "tests", "tools", "dwarf_patch_member.c"), "-ldw", "-lelf"], timeout=120)
        check(r.rc == 0, "building dwarf_patch_member failed", r.describe())
    what = "%s.%s" % (struct, member) if member else "sizeof(struct %s)" % struct

    def patch(src, dst):
        shutil.copyfile(src, dst)
        p = run_cmd([patcher, dst, struct, member, str(value)], timeout=120)
        check(p.rc == 0 and int(p.out.strip() or 0) >= 1, "patching %s in %s" % (what, dst), p.describe())
        log("%s set to %s in %s compilation units" % (what, value, p.out.strip()))

    return derived_target(target, name, beam_transform=patch)


def add_zlib_bomb(src, dst, inflated=3 << 29):
    """Copy beam SRC to DST with a .debug_info section compressed the ELF
    way (SHF_COMPRESSED: an Elf64_Chdr, then zlib) that inflates to
    INFLATED bytes of zeros (1.5 GiB: a few MB in the file)."""
    import struct
    import zlib
    payload = os.path.join(os.path.dirname(dst), "bomb.bin")
    z = zlib.compressobj(1)
    chunk = bytes(16 << 20)
    with open(payload, "wb") as f:
        f.write(struct.pack("<IIQQ", 1, 0, inflated, 1))  # ELFCOMPRESS_ZLIB, size, alignment
        for _ in range(inflated // len(chunk)):
            f.write(z.compress(chunk))
        f.write(z.flush())
    r = run_cmd(["objcopy", "--add-section", ".debug_info=%s" % payload,
                 "--set-section-flags", ".debug_info=readonly,debug", "--set-section-alignment",
                 ".debug_info=8", src, dst], timeout=120)
    check(r.rc == 0, "objcopy --add-section .debug_info", r.describe())
    os.unlink(payload)
    # SHF_COMPRESSED (0x800) on that section's header (objcopy has no flag
    # for it): ELF64 little-endian, section headers at e_shoff
    with open(dst, "r+b") as f:
        data = f.read()
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
        stroff, = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)
        for i in range(shnum):
            at = shoff + i * shentsize
            name_off, = struct.unpack_from("<I", data, at)
            name = data[stroff + name_off:data.index(b"\0", stroff + name_off)]
            if name == b".debug_info":
                flags, = struct.unpack_from("<Q", data, at + 8)
                f.seek(at + 8)
                f.write(struct.pack("<Q", flags | 0x800))
                return
    check(False, "no .debug_info section in %s after objcopy" % dst)


@per_vm(only=["stock"])
@asan("a beam whose compressed debug section would inflate past the limit")
@timeout(240)
def test_compressed_debug_section_bomb(target):
    """The target's own files are untrusted, its DWARF included.
    A copy of the VM whose beam.smp carries a .debug_info section of a few
    MB that inflates to 1.5 GiB (SHF_COMPRESSED: libdw inflates it in
    memory, to the size its header gives, when it reads the DWARF): each
    tool leaves the file unused, says why under -v, and stays within
    200 MB and its time limit; the VM itself runs from it (the kernel
    does not read debug sections).  Reading it, the tools grew past
    1.5 GB."""
    t = derived_target(target, "zbomb", beam_transform=add_zlib_bomb)
    size = os.path.getsize(t.beam)
    check(size < os.path.getsize(target.beam) + (64 << 20), "the bomb is %d bytes: not a small file" % size)
    with VM(t) as vm:
        seen = []
        for name, args in all_tools(str(vm.pid)):
            r, rss = measured(name, "-v", *args, timeout=120)
            what = "%s %s (a 1.5 GiB zlib bomb in .debug_info)" % (name, args[0])
            check(rss < 200 * 1024 * time_scale(), "%s: peak RSS %d KB" % (what, rss), r.describe())
            check(within_time(r, 10), "%s: took %.1f s (%s s of CPU)" % (what, r.elapsed, r.cpu_s), r.describe())
            if name != HEAP:
                check("once inflated (limit 1024): not used" in r.err, "%s: no note that the beam was not used"
                      % what, r.describe())
            seen.append("%s %s exit %d %d MB" % (name, args[0], r.rc, rss // 1024))
        log("; ".join(seen))


@per_vm(only=["otp25-jit-dwarf", "otp25-emu-dwarf"])
@asan("DWARF offsets from the target's binary validated before use")
@timeout(180)
def test_implausible_dwarf_offset_not_used(target):
    """Offsets from the target's DWARF are validated before use
    (they used to override the release table unchecked).  A copy of the
    DWARF build whose .debug_info puts process.i at 65528, past the end of
    struct process (776 bytes), in every compilation unit
    (tests/tools/dwarf_patch_member.c): each tool warns once, naming the
    field, and keeps the table's offset: --check fails table-vs-dwarf
    alone (the table and the DWARF disagree) and passes every check of
    the live VM, the profile names
    xb_split's two functions, --pstack shows xb_deep's stack, the perf map
    and erlang-heapsample work.  Used unchecked, every process's
    instruction pointer would be read 64 KiB past it."""
    d = tmpdir()
    t = dwarf_patched_target(target, "bad-dwarf-i", "process", "i", 65528)
    warn = re.compile(r"^erlang-[a-z-]+: warning: this beam's DWARF gives 1 implausible offsets \(e\.g\. process\.i = 65528 "
                      r"\(outside the struct\)\); not used$", re.M)
    with VM(t, schedulers=2) as vm:
        vm.eval("xb_split:start(75), xb_deep:start()")
        wait_running(vm, "xb_split")
        wait_running(vm, "xb_deep")
        # --check: the one disagreement with the table is the one check
        # that fails (it compares the table with the DWARF as it is); the
        # checks of the live VM pass, on the table's offset
        r = run_tool(SAMPLE, "--check", str(vm.pid), timeout=60 * time_scale())
        fails = [l for l in r.out.splitlines() if l.startswith("FAIL")]
        oks = [l for l in r.out.splitlines() if l.startswith("ok")]
        check(r.rc == 1 and len(fails) == 1 and fails[0].split()[1] == "table-vs-dwarf" and
              "first: process.i table 256, DWARF 65528" in fails[0] and len(oks) >= 10,
              "--check on a beam with an implausible DWARF offset: exit %s, %d ok, FAIL %s"
              % (r.rc, len(oks), fails), r.describe() + r.out)
        check(len(warn.findall(r.err)) == 1, "--check: not one warning naming process.i", r.err[-2000:])
        r = run_tool(SAMPLE, "-d", "2", str(vm.pid), timeout=60 * time_scale())
        check(r.rc == 0 and len(warn.findall(r.err)) == 1, "sampling: exit %s, not one warning" % r.rc,
              r.describe())
        rows = {n: c for c, n, _, tag in parse_table(r.out).rows if tag == "[Erlang]"}
        hot = rows.get("xb_split:hot_a/1", 0) + rows.get("xb_split:hot_b/1", 0)
        check(hot >= 100, "the profile does not name xb_split's functions (%d samples)" % hot, r.out[:3000])
        r = run_tool(SAMPLE, "--pstack", str(vm.pid), timeout=60 * time_scale())
        check(r.rc == 0 and re.search(r"xb_deep:leaf/1 \[Erlang\]\n.*xb_deep:d/1 \[Erlang\]", r.out),
              "--pstack does not show xb_deep's stack", r.describe())
        for tool, args in ((PERFMAP, ["-o", os.path.join(d, "m.map")]), (HEAP, ["-t", "5"])):
            r = run_tool(tool, *(args + [str(vm.pid)]), timeout=60 * time_scale())
            check(r.rc == 0 and len(warn.findall(r.err)) == 1, "%s: exit %s, not one warning" % (tool, r.rc),
                  r.describe())
        log("hot_a + hot_b: %d samples; one warning per tool: %s" % (hot, warn.search(r.err).group(0)))


@per_vm(only=["otp25-jit-dwarf"])
@asan("DWARF struct sizes from the target's binary validated before use")
@timeout(180)
def test_implausible_dwarf_process_size_not_used(target):
    """The size of struct process from the target's DWARF is
    held to what a process struct can be (16 KiB; 776 bytes in OTP 25):
    the tools read processes 256 at a time, and a DWARF that said 1 MiB
    had them allocate and read 512 MiB a batch.  A copy of the DWARF build
    whose .debug_info says struct process is 65000 bytes (the most its
    attribute's form holds; tests/tools/dwarf_patch_member.c): each tool
    warns once, naming it, and keeps the table's size: the profile names
    xb_split's functions and erlang-heapsample reads the processes."""
    t = dwarf_patched_target(target, "bad-dwarf-size", "process", "", 65000)
    warn = re.compile(r"^erlang-[a-z-]+: warning: this beam's DWARF gives 1 implausible offsets \(e\.g\. process size = 65000\); "
                      r"not used$", re.M)
    with VM(t, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        r = run_tool(SAMPLE, "-d", "2", str(vm.pid), timeout=60 * time_scale())
        check(r.rc == 0 and len(warn.findall(r.err)) == 1, "sampling: exit %s, not one warning naming the size"
              % r.rc, r.describe())
        rows = {n: c for c, n, _, tag in parse_table(r.out).rows if tag == "[Erlang]"}
        hot = rows.get("xb_split:hot_a/1", 0) + rows.get("xb_split:hot_b/1", 0)
        check(hot >= 100, "the profile does not name xb_split's functions (%d samples)" % hot, r.out[:3000])
        r = run_tool(HEAP, "-t", "5", str(vm.pid), timeout=60 * time_scale())
        procs = re.findall(r"<0\.\d+\.0>", r.out)
        check(r.rc == 0 and len(warn.findall(r.err)) == 1 and len(procs) >= 5,
              "erlang-heapsample: exit %s, not one warning, or not 5 processes" % r.rc, r.describe() + r.out)
        log("hot_a + hot_b: %d samples; %s" % (hot, warn.search(r.err).group(0)))


# what a terminal would act on: C0 controls but newline and tab, DEL, and
# C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F: CSI and OSC to some)
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


@per_vm(only=["stock", "otp25-emu-dwarf"])
@timeout(180)
def test_control_characters_from_the_vm_never_printed(target):
    """Names read from a real VM carry whatever bytes its atoms hold: a
    function made at run time (compile:forms) whose name holds ESC
    sequences, a newline, BEL and U+009B (CSI), run busy by a process
    registered under such a name too (the compiler refuses control
    characters in a module's name, not in a function's).  No output of any tool --
    the table, --by process, folded, --pstack, --dump as text and JSON,
    the perf map, erlang-heapsample's table, CSV and JSON, --contents,
    and every stderr -- holds a raw control character ("a name
    read from the VM never reaches a terminal or a file with control
    characters in it"), and each shows the process (its names escaped,
    not dropped)."""
    with VM(target, schedulers=2) as vm:
        pid = vm.eval(
            'M = xb_esc, F = list_to_atom("spin\\n\\e[2J" ++ [16#9B] ++ "x" ++ [7]), '
            'Forms = [{attribute,1,module,M}, {attribute,1,export,[{F,1}]}, '
            '{function,1,F,1,[{clause,1,[{var,1,\'N\'}],[],'
            '[{call,1,{atom,1,F},[{op,1,\'+\',{var,1,\'N\'},{integer,1,1}}]}]}]}], '
            '{ok,M,Bin} = compile:forms(Forms), {module,M} = code:load_binary(M, "xb_esc.erl", Bin), '
            'P = spawn(M, F, [0]), '
            'true = register(list_to_atom("xb_reg\\e]0;owned" ++ [7, 16#9B]), P), pid_to_list(P)'
        ).strip().strip('"')
        check(pid.startswith("<0."), "the workload did not start: %s" % pid)
        d = tmpdir()
        mpath = os.path.join(d, "perf.map")
        runs = [(SAMPLE, ["-d", "1"]), (SAMPLE, ["-d", "1", "--by", "process"]),
                (SAMPLE, ["-d", "1", "--format", "folded"]), (SAMPLE, ["--pstack"]),
                (SAMPLE, ["--dump"]), (SAMPLE, ["--dump", "--format", "json"]),
                (PERFMAP, ["-o", mpath]), (HEAP, ["-t", "0"]), (HEAP, ["-t", "0", "--format", "csv"]),
                (HEAP, ["-t", "0", "--format", "json"]), (HEAP, ["--contents", pid])]
        seen = []
        for tool, args in runs:
            argv = [tool_path(tool)] + args + [str(vm.pid)]
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60 * time_scale())
            what = "%s %s" % (tool, " ".join(args))
            out = open(mpath, "rb").read() if tool == PERFMAP else p.stdout
            check(p.returncode == 0, "%s: exit %s" % (what, p.returncode), p.stderr.decode(errors="replace"))
            for name, data in (("output", out), ("stderr", p.stderr)):
                m = RAW_CONTROL.search(data)
                check(not m, "%s: a raw control character %r in its %s" % (what, m and m.group(0), name),
                      data[max(0, (m.start() if m else 0) - 200):(m.end() if m else 0) + 200].decode(errors="replace"))
            # the process is shown, its names escaped (xb_esc, xb_reg in
            # some spelling), not dropped
            text = out.decode(errors="replace")
            want = pid if args[:1] == ["--contents"] else "xb_reg" if tool == HEAP else "xb_esc"
            check(want in text, "%s: %s not shown" % (what, want), text[:2000])
            seen.append(what)
        line = [l for l in open(mpath, errors="replace") if "xb_esc" in l]
        check(line, "the perf map has no line for xb_esc")
        log("no raw control character in %d outputs; e.g. the perf map's %r" % (len(seen), line[0].strip()))
