"""Bad input must fail cleanly: non-zero exit, exactly one non-empty line on
stderr, no crash (signal, abort), no assertion or sanitizer report.

Section "erlang-write-perf-map": bad input.  Other tools' cases can reuse
expect_clean_failure().  Section "privileges": the message names the
capability that is missing.
"""

import os
import re
import shutil
import subprocess
import sys

from xbtest import (asan, VM, check, log, nobody_copy, per_vm, run_cmd, run_tool, skip, skip_because,
                    time_scale, tmpdir, tool_path)

SAMPLE = "erlang-sample"
PERFMAP = "erlang-write-perf-map"
HEAP = "erlang-heapsample"
BAD_TEXT = ("Assertion", "Sanitizer", "runtime error", "Segmentation", "core dumped",
            "AddressSanitizer", "LeakSanitizer")


def expect_clean_failure(r, what):
    desc = r.describe()
    check(not r.timed_out, "%s: timed out" % what, desc)
    check(r.rc is not None and r.rc >= 0, "%s: killed by signal %d" % (what, -(r.rc or 0)), desc)
    check(r.rc not in (134, 136, 139), "%s: exit %d looks like a crash" % (what, r.rc), desc)
    check(r.rc != 0, "%s: exit status 0" % what, desc)
    for t in BAD_TEXT:
        check(t not in r.err and t not in r.out, "%s: %r in the output" % (what, t), desc)
    lines = r.lines_err
    check(len(lines) == 1, "%s: %d lines on stderr, expected exactly 1" % (what, len(lines)),
          desc)
    check(lines[0].strip(), "%s: empty stderr line" % what, desc)
    return lines[0]


def free_pid():
    """A PID with no process (nothing in /proc)."""
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
    except (OSError, ValueError):
        pid_max = 32768
    for pid in range(pid_max - 1, 300, -1):
        if not os.path.exists("/proc/%d" % pid):
            return pid
    raise AssertionError("no free pid")


# --------------------------------------------------------------------------
# erlang-write-perf-map

def test_perfmap_no_such_pid():
    pid = free_pid()
    msg = expect_clean_failure(run_tool(PERFMAP, "-o", os.path.join(tmpdir(), "x.map"), pid),
                               "PID %d (no such process)" % pid)
    check(str(pid) in msg, "message does not name the PID: %r" % msg)
    log(msg)


def test_perfmap_not_a_beam():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        out = os.path.join(tmpdir(), "x.map")
        msg = expect_clean_failure(run_tool(PERFMAP, "-o", out, sleeper.pid),
                                   "PID %d (sleep)" % sleeper.pid)
        check(not os.path.exists(out), "a map was written for a non-BEAM process")
        check(sleeper.poll() is None, "the sleep process died")
        log(msg)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_perfmap_non_numeric_pid():
    msgs = []
    for arg in ("abc", "12abc", "1.5", "0x10", "", " ", "99999999999999999999", "0"):
        r = run_tool(PERFMAP, "-o", os.path.join(tmpdir(), "x.map"), arg)
        msgs.append(expect_clean_failure(r, "PID argument %r" % arg))
    log(msgs[0])


def test_perfmap_no_arguments():
    msg = expect_clean_failure(run_tool(PERFMAP), "no arguments")
    log(msg)
    expect_clean_failure(run_tool(PERFMAP, "-o", "/tmp/x.map"), "-o but no PID")
    expect_clean_failure(run_tool(PERFMAP, "1", "2"), "two PIDs")
    expect_clean_failure(run_tool(PERFMAP, "--no-such-option", "1"), "unknown option")
    expect_clean_failure(run_tool(PERFMAP, "-o"), "-o without a value")


@per_vm(only=["stock", "otp25-emu-dwarf"])
@asan("bad input")
def test_perfmap_unwritable_output(target):
    with VM(target) as vm:
        cases = [("/nonexistent-dir/x.map", "directory does not exist"),
                 ("/proc/xb-test.map", "read-only place (/proc)"),
                 ("/proc/%d/xb-test.map" % vm.pid, "read-only place (/proc/PID)"),
                 (tmpdir(), "a directory"),
                 ("", "an empty path"),
                 # A trailing slash means a directory: writing a file named
                 # like it would be wrong.  (Inside tmpdir, so a tool that
                 # does create it only litters the test's own directory.)
                 (os.path.join(tmpdir(), "no-such-dir") + "/",
                  "a directory (trailing slash) that does not exist")]
        if os.geteuid() != 0:
            ro = os.path.join(tmpdir(), "ro")
            os.mkdir(ro, 0o555)
            cases.append((os.path.join(ro, "x.map"), "read-only directory"))
        for path, what in cases:
            r = run_tool(PERFMAP, "-o", path, vm.pid, timeout=30)
            msg = expect_clean_failure(r, "-o %r (%s)" % (path, what))
            log("%s: %s" % (what, msg))
            if path.endswith("/"):
                check(not os.path.lexists(path.rstrip("/")),
                      "-o %s created %s" % (path, path.rstrip("/")))
        check(vm.alive(), "the VM died")


# --------------------------------------------------------------------------
# privileges: the message names the capability that is missing

def fixture_as(user_argv, exe, *args):
    """A fake VM (tests/fixtures/fakebeam.c) started through USER_ARGV
    (setpriv ...: an exec as that user, so the process stays dumpable and
    its own user may read it); killed by the caller."""
    p = subprocess.Popen(user_argv + [exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    line = p.stdout.readline().decode().strip()
    if line != "ready":
        p.kill()
        check(False, "the fake VM did not start: %r %s" % (line, p.stderr.read().decode(errors="replace")))
    return p


def test_privilege_messages_name_the_missing_capability():
    """Without capabilities, as user nobody: --check of root's process
    (and the other tools' modes) fails with the one line naming
    CAP_SYS_PTRACE, the one capability missing for it; --include-kernel
    on nobody's own process, at kernel.perf_event_paranoid 2 (or more;
    the test does not change it), names CAP_PERFMON and not
    CAP_SYS_PTRACE, while the same run without --include-kernel samples
    that process (so it is the kernel frames that are refused)."""
    if not shutil.which("setpriv"):
        skip_because("needs-package", None, "setpriv (util-linux)")
    if os.geteuid() != 0:
        skip_because("needs-root", None, "runs the tools as user nobody")
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        paranoid = int(f.read())
    if paranoid < 2:
        skip("kernel.perf_event_paranoid is %d here: kernel frames are allowed without CAP_PERFMON, "
             "nothing to refuse (the test does not change the sysctl)" % paranoid)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_hostile import build_fixture
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all",
              "--bounding-set=-all"]
    tools = {t: nobody_copy(t) for t in (SAMPLE, PERFMAP, HEAP)}
    results = []
    root_vm = fixture_as([], exe, "jit", "ok")
    try:
        for tool, args in ((SAMPLE, ["--check"]), (SAMPLE, ["-d", "1"]), (HEAP, []),
                           (PERFMAP, ["-o", os.path.join(tmpdir(), "x.map")])):
            what = "as nobody without capabilities, %s %s on root's process" % (tool, " ".join(args))
            r = run_cmd(nobody + [tools[tool]] + args + [str(root_vm.pid)], timeout=30)
            if args == ["--check"]:
                # --check reports on stdout, one line per check: the
                # attach check fails and nothing else runs
                check(r.rc == 1, "%s: exit %s" % (what, r.rc), r.describe())
                fails = [l for l in r.out.splitlines() if l.startswith("FAIL")]
                check(len(fails) == 1 and fails[0].split()[1] == "attach", "%s: expected one FAIL line, "
                      "the attach check" % what, r.describe())
                line = fails[0]
                check(not r.lines_err, "%s: stderr %r" % (what, r.lines_err))
            else:
                line = expect_clean_failure(r, what)
            check("CAP_SYS_PTRACE" in line, "%s: the message does not name CAP_SYS_PTRACE: %r" % (what, line))
            check("CAP_PERFMON" not in line, "%s: the message asks for CAP_PERFMON too, which is not what is "
                  "missing: %r" % (what, line))
            results.append(line)
    finally:
        root_vm.kill()
        root_vm.wait()
    own = fixture_as(nobody, exe, "jit", "ok")
    try:
        what = "as nobody without capabilities, --include-kernel on nobody's own process (paranoid %d)" % paranoid
        r = run_cmd(nobody + [tools[SAMPLE], "-d", "1", "--include-kernel", str(own.pid)], timeout=30)
        line = expect_clean_failure(r, what)
        check("CAP_PERFMON" in line, "%s: the message does not name CAP_PERFMON: %r" % (what, line))
        check("CAP_SYS_PTRACE" not in line, "%s: the message names CAP_SYS_PTRACE, which is not missing for "
              "the user's own process: %r" % (what, line))
        results.append(line)
        r = run_cmd(nobody + [tools[SAMPLE], "-d", "1", str(own.pid)], timeout=30)
        check(r.rc == 0 and "fake:spin/0" in r.out, "as nobody, the same run without --include-kernel does not "
              "sample nobody's own process", r.describe() + r.out)
    finally:
        own.kill()
        own.wait()
    for l in results:
        log(l[:250])


@per_vm(only=["stock"])
@asan("write errors of every tool and mode")
def test_write_errors_every_tool(target):
    """Standard output on a full disk (/dev/full), every tool and mode that
    writes there: exit 1 and one line saying the write failed ("write
    errors exit non-zero"; erlang-sample's profile formats have
    their own test in test_outputs)."""
    runs = [(SAMPLE, ["--pstack"]), (SAMPLE, ["--check"]), (SAMPLE, ["--dump"]),
            (SAMPLE, ["-d", "1", "--format", "folded"]), (SAMPLE, ["-d", "1", "--schedulers"]),
            (SAMPLE, ["-d", "1", "--long-calls"]),
            (HEAP, []), (HEAP, ["--alloc"]), (HEAP, ["--contents", "xb_ctl"]),
            (HEAP, ["--interval", "0.3", "--count", "2"]), (PERFMAP, ["-o", "-"])]
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        for tool, args in runs:
            what = "%s %s > /dev/full" % (tool, " ".join(args))
            with open("/dev/full", "w") as full:
                p = subprocess.run([tool_path(tool)] + args + [str(vm.pid)], stdout=full, stderr=subprocess.PIPE,
                                   timeout=60 * time_scale())
            err = p.stderr.decode(errors="replace")
            lines = [l for l in err.splitlines() if l.strip()]
            check(p.returncode == 1, "%s: exit %d" % (what, p.returncode), err)
            check(len(lines) == 1 and re.search(r"writ(e|ing)", lines[0]), "%s: not one line saying the write "
                  "failed" % what, err)
        log("%d runs with standard output on /dev/full: exit 1, one line each" % len(runs))
