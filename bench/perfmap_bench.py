#!/usr/bin/python3
"""perfmap_bench - how long erlang-write-perf-map takes on a realistic VM.

    python3 bench/perfmap_bench.py [-n RUNS] [--vm NAME]... [--target-ms 200]

For each VM (default: "stock" and, when built, "otp25-emu-dwarf"): start it
with every module of kernel, stdlib and compiler loaded, then run, interleaved
in the same loop so that machine noise hits all alike,
    erlang-write-perf-map -o FILE PID      (the thing measured)
    /bin/true                              (baseline: process spawn cost)
    cat /proc/PID/maps                     (baseline: reading the VM's maps)
RUNS times each (after 2 warm-up rounds), and print median and p90 wall time
in ms, median / target (200 ms), and median / baseline.  Prints PASS when the
tool's p90 is within the target, FAIL otherwise (a measurement: exit 0 either
way).  Exits 1 when the tool (or a VM) fails, a VM asked for with --vm is not
built, or nothing was measured.  Python 3 standard library only.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "lib"))
import xbtest  # noqa: E402

LOAD_ALL = """
[application:load(A) || A <- [kernel, stdlib, compiler]],
Mods = lists:append([begin {ok, Ms} = application:get_key(A, modules), Ms end
                     || A <- [kernel, stdlib, compiler]]),
Failed = [M || M <- Mods, element(1, code:ensure_loaded(M)) =/= module],
{length(Mods), Failed, length(code:all_loaded())}
"""


def timed(argv):
    t0 = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = (time.perf_counter() - t0) * 1000.0
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), r.returncode,
                                                    r.stderr.decode(errors="replace")))
    return dt


def pct(values, p):
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def bench_vm(target, runs, target_ms):
    tool = xbtest.tool_path("erlang-write-perf-map")
    out = os.path.join(xbtest.tmpdir(), "bench-%s.map" % target.name)
    with xbtest.VM(target) as vm:
        info = vm.eval(LOAD_ALL, timeout=120)
        vm.wait_code_quiet()
        cmds = {
            "erlang-write-perf-map": [tool, "-o", out, str(vm.pid)],
            "/bin/true": ["/bin/true"],
            "cat /proc/PID/maps": ["cat", "/proc/%d/maps" % vm.pid],
        }
        times = {k: [] for k in cmds}
        for i in range(runs + 2):
            for k, argv in cmds.items():
                dt = timed(argv)
                if i >= 2:
                    times[k].append(dt)
        with open(out) as f:
            entries = sum(1 for _ in f)
        if entries < 1000:
            raise RuntimeError("the map has only %d entries" % entries)
    print("VM %s (OTP %s, %s, %s): pid %d, {modules in kernel+stdlib+compiler, not loadable, "
          "loaded modules} = %s; map: %d entries" % (target.name, target.otp_version,
                                                     target.flavor, target.debug, vm.pid, info,
                                                     entries))
    print("  %-24s %9s %9s %9s" % ("command", "median", "p90", "min"))
    for k, v in times.items():
        print("  %-24s %7.2fms %7.2fms %7.2fms" % (k, statistics.median(v), pct(v, 90), min(v)))
    med = statistics.median(times["erlang-write-perf-map"])
    p90 = pct(times["erlang-write-perf-map"], 90)
    base = statistics.median(times["/bin/true"])
    base2 = statistics.median(times["cat /proc/PID/maps"])
    print("  median / %d ms target: %.3f   p90 / target: %.3f" % (target_ms, med / target_ms,
                                                                  p90 / target_ms))
    print("  median / baseline (/bin/true): %.1fx   median / cat maps: %.1fx"
          % (med / base, med / base2))
    ok = p90 <= target_ms
    print("  %s: p90 %.1f ms %s %d ms target (%d runs)" % ("PASS" if ok else "FAIL", p90,
                                                           "<=" if ok else ">", target_ms, runs))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=20)
    ap.add_argument("--vm", action="append", help="target name (default: stock, otp25-emu-dwarf)")
    ap.add_argument("--target-ms", type=float, default=200.0)
    args = ap.parse_args()
    names = args.vm or ["stock", "otp25-emu-dwarf"]
    results = []
    errors = 0
    for n in names:
        t = xbtest.load_target(n)
        if not t.present:
            print("VM %s: skipped (%s)" % (n, t.missing))
            errors += bool(args.vm)  # asked for by name: an error
            continue
        try:
            results.append((n, bench_vm(t, args.runs, args.target_ms)))
        except Exception as e:  # report, go on, and exit 1 at the end
            print("VM %s: error: %s" % (n, e))
            errors += 1
    print("overall: %s" % ("PASS" if results and all(ok for _, ok in results) else "FAIL"))
    if errors or not results:
        print("perfmap_bench: %d error(s)%s: exit 1" % (errors, "" if results else
                                                        ", nothing measured"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
