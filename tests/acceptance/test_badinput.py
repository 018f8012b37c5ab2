"""Bad input must fail cleanly: non-zero exit, exactly one non-empty line on
stderr, no crash (signal, abort), no assertion or sanitizer report.

Section "erlang-write-perf-map" (issue 2, c).  Other tools' cases can reuse
expect_clean_failure().
"""

import os
import subprocess

from xbtest import asan, VM, check, log, per_vm, run_tool, tmpdir

PERFMAP = "erlang-write-perf-map"
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
