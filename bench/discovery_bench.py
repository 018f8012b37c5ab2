#!/usr/bin/python3
"""discovery_bench - what proving and discovering struct offsets costs at attach.

One VM whose layout no exact table gives (default: the stripped
layout-shifted OTP 25 JIT build, tests/build-vms.sh) is loaded with
100,000 idle processes and every module of its OTP installation (the
code of a large application: some 2,000 modules), then timed in ROUNDS
interleaved rounds of two runs each (order shuffled per round, seeded):

  proven       erlang-sample --write-layout /dev/null --layout KEY: the
               offsets given (KEY: the layout its unstripped sibling's
               DWARF gives), every one proven on the VM, none searched
  discovered   erlang-sample --write-layout /dev/null: the nearest table,
               the offsets that fail searched in the VM's data, then proven

Both attach, prove every field in use (all features) and write the same
layout.  Printed: the median wall time of each with a bootstrap 95%
interval, their difference (what discovery adds: the target is at most
1 s) and ratio, the reads of the VM each made (the proofs' and the
search's bounds: src/beam/prove.c), and whether the two layouts are the
same.

Usage: python3 bench/discovery_bench.py [--target NAME] [--processes N]
       [--rounds N] [--seed S]
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
import xbtest  # noqa: E402

LOAD = ("Mods = [list_to_atom(filename:basename(F, \".beam\")) || D <- code:get_path(), "
        "F <- filelib:wildcard(filename:join(D, \"*.beam\"))], "
        "[code:ensure_loaded(M) || M <- Mods], length(erlang:loaded())")
SPAWN = ("Self = self(), [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, %d)], "
         "erlang:system_info(process_count)")


def ci95(values, rng, n=2000):
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"),) * 2
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n)]


def timed(argv):
    t0 = time.monotonic()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    return time.monotonic() - t0, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="otp25-jit-shifted-stripped")
    ap.add_argument("--processes", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tool = os.path.join(xbtest.build_dir(), "erlang-sample")
    target = xbtest.load_target(a.target)
    if not target.present:
        sys.exit("discovery_bench: %s: %s" % (a.target, target.missing))
    key_target = xbtest.load_target(a.target[:-len("-stripped")]) if a.target.endswith("-stripped") else None
    xbtest._current["tmp"] = xbtest.tempfile.mkdtemp(prefix="discovery-bench-")
    key = os.path.join(xbtest._current["tmp"], "key.layout")
    if key_target and key_target.present:
        with xbtest.VM(key_target, schedulers=2) as vm:
            r = subprocess.run([tool, "--write-layout", key, str(vm.pid)], stderr=subprocess.PIPE, text=True)
            if r.returncode:
                sys.exit("discovery_bench: the DWARF build's layout: %s" % r.stderr)
    with xbtest.VM(target, schedulers=2, start_timeout=120) as vm:
        mods = vm.eval(LOAD, timeout=600)
        procs = vm.eval(SPAWN % a.processes, timeout=600)
        print("VM %s (erts %s, %s): %s modules loaded, %s processes" % (target.name, target.erts, target.flavor,
                                                                        mods, procs))
        if not os.path.exists(key):
            r = subprocess.run([tool, "--write-layout", key, str(vm.pid)], stderr=subprocess.PIPE, text=True)
            if r.returncode:
                sys.exit("discovery_bench: %s" % r.stderr)
            print("(no DWARF sibling: the key is this VM's own discovered layout)")
        runs = {"proven": [], "discovered": []}
        reads = {}
        layouts = {}
        print("seed %d, %d rounds" % (a.seed, a.rounds))
        for rnd in range(a.rounds):
            order = ["proven", "discovered"]
            rng.shuffle(order)
            for what in order:
                out = os.path.join(xbtest._current["tmp"], what + ".layout")
                argv = [tool, "--write-layout", out, "-vv", str(vm.pid)]
                if what == "proven":
                    argv[3:3] = ["--layout", key]
                secs, r = timed(argv)
                if r.returncode:
                    sys.exit("discovery_bench: %s failed: %s" % (what, r.stderr[-2000:]))
                runs[what].append(secs)
                m = re.findall(r"layout: (.+?) proven in ([\d.]+) ms", r.stderr)
                reads[what] = m
                with open(out) as f:
                    layouts[what] = sorted(l.split()[:3] for l in f if l.startswith("field "))
    p, d = runs["proven"], runs["discovered"]
    mp, md = statistics.median(p), statistics.median(d)
    lo_p, hi_p = ci95(p, rng)
    lo_d, hi_d = ci95(d, rng)
    diffs = [y - x for x, y in zip(p, d)]
    lo_x, hi_x = ci95(diffs, rng)
    print("proven      %.3f s  [%.3f, %.3f]" % (mp, lo_p, hi_p))
    print("discovered  %.3f s  [%.3f, %.3f]" % (md, lo_d, hi_d))
    print("discovery adds %.3f s [%.3f, %.3f] per attach (paired by round; target <= 1 s): %s; ratio %.2f"
          % (statistics.median(diffs), lo_x, hi_x, "met" if hi_x <= 1.0 else "NOT MET", md / mp))
    print("the layouts %s" % ("are the same" if layouts["proven"] == layouts["discovered"] else "DIFFER"))
    print("last discovered run, by proof: %s" % ", ".join("%s %s ms" % x for x in reads.get("discovered", [])))
    return 0 if hi_x <= 1.0 and layouts["proven"] == layouts["discovered"] else 1


if __name__ == "__main__":
    sys.exit(main())
