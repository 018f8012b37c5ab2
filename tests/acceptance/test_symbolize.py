"""erlang-write-perf-map --symbolize: stock perf, told the truth.

A VM started without flags has its JIT code dual-mapped from a memfd; perf
6.1 names none of it ("[unknown] (/memfd:vmem (deleted))"), whatever map
is written.  `perf script | erlang-write-perf-map --symbolize PID` names
those frames, in samples and in callchains (where perf prints them relative
to the memfd), without restarting the VM; a perf map file works too.
"""

import os
import re
import shutil
import subprocess

from xbtest import asan, VM, check, log, per_vm, run_cmd, run_tool, skip, tmpdir, tool_path
from xbsample import wait_running  # noqa: E402

TOOL = "erlang-write-perf-map"
UNNAMED = re.compile(r"(?:^|\s)[0-9a-f]{1,16}( \[unknown\] )(\(/memfd:.*\))$")


def perf_record(vm, callgraph):
    data = os.path.join(tmpdir(), "perf-%s.data" % ("g" if callgraph else "flat"))
    argv = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "499", "-p", str(vm.pid), "-o", data]
    if callgraph:
        argv.append("-g")
    r = run_cmd(argv + ["--", "sleep", "3"], timeout=60)
    check(r.rc == 0, "perf record failed", r.describe())
    r = run_cmd(["perf", "script", "-i", data, "-F", "comm,tid,time,ip,sym,dso"], timeout=60)
    check(r.rc == 0 and r.out, "perf script failed", r.describe())
    return r.out


def symbolize(text, *args):
    p = subprocess.run([tool_path(TOOL), "--symbolize", "-v"] + [str(a) for a in args], input=text,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 0, "--symbolize %s: exit %d" % (args, p.returncode), p.stderr)
    return p.stdout, p.stderr


def compare(before, after, what):
    """Line for line: unnamed memfd frames named, everything else unchanged.
    Returns {name: count}."""
    b, a = before.splitlines(), after.splitlines()
    check(len(b) == len(a), "%s: %d lines in, %d out" % (what, len(b), len(a)))
    names, unnamed, left = {}, 0, 0
    for x, y in zip(b, a):
        m = UNNAMED.search(x)
        if not m:
            check(x == y, "%s: a line that was not an unnamed JIT frame changed:\n%s\n%s" % (what, x, y))
            continue
        unnamed += 1
        head, tail = x[:m.start(1)], " " + m.group(2)
        check(y.startswith(head + " ") and y.endswith(tail),
              "%s: more than the name changed:\n%s\n%s" % (what, x, y))
        name = y[len(head) + 1:len(y) - len(tail)]
        if name == "[unknown]":
            left += 1
            continue
        names[name] = names.get(name, 0) + 1
    log("%s: %d unnamed JIT frames in perf's output, %d left unnamed; top: %s"
        % (what, unnamed, left, sorted(names.items(), key=lambda kv: -kv[1])[:3]))
    check(unnamed >= 200, "%s: only %d unnamed JIT frames: is the VM dual-mapped?" % (what, unnamed))
    check(left <= 0.02 * unnamed, "%s: %d of %d JIT frames still unnamed" % (what, left, unnamed))
    return names


@per_vm(flavor="jit")
@asan("perf script parsing")
def test_symbolize_perf_script(target):
    if not shutil.which("perf"):
        skip("perf is not installed (Debian's linux-perf; tests/run-all.sh installs it)")
    with VM(target) as vm:
        check(any("/memfd:" in l and " r-xs " in l for l in open("/proc/%d/maps" % vm.pid)),
              "the VM's JIT code is not memfd-backed")
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        # README ("perf ignores every map for it"): our map at perf's own
        # path, /tmp/perf-PID.map, and perf still leaves the memfd code
        # unnamed (compare() needs >= 200 such frames in its output).
        default_map = "/tmp/perf-%d.map" % vm.pid
        r = run_tool(TOOL, vm.pid, timeout=30)
        check(r.rc == 0 and os.path.getsize(default_map) > 0, "writing %s failed" % default_map, r.describe())
        try:
            texts = [perf_record(vm, callgraph) for callgraph in (False, True)]
        finally:
            os.unlink(default_map)
        for callgraph in (False, True):
            what = "perf script%s, with our map at %s" % (" (callchains)" if callgraph else "", default_map)
            text = texts[callgraph]
            out, err = symbolize(text, vm.pid)
            names = compare(text, out, what)
            a, b = names.get("xb_split:hot_a/1", 0), names.get("xb_split:hot_b/1", 0)
            check(a + b > 0.6 * sum(names.values()), "%s: hot_a/hot_b are not most frames" % what)
            check(a > b, "%s: hot_a/1 (75%%) below hot_b/1 (25%%): %d vs %d" % (what, a, b))
            # the VM of the samples, found in the input
            out2, _ = symbolize(text)
            check(out2 == out, "%s: --symbolize without a PID differs from --symbolize PID" % what)
            if not callgraph:
                mp = os.path.join(tmpdir(), "map")
                r = run_tool(TOOL, "-o", mp, vm.pid, timeout=30)
                check(r.rc == 0, "writing the map failed", r.describe())
                out3, _ = symbolize(text, mp)
                check(out3 == out, "--symbolize MAP differs from --symbolize PID")
