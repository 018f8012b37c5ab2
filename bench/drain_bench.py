#!/usr/bin/python3
"""drain_bench - how the perf path's drain loop gets the CPU on a saturated
machine, and what each choice costs ("decide how the draining
thread gets CPU on a saturated machine (priority, batching, wake-ups)
without taking more than it needs; measure it").

Saturates the machine (HOGS busy loops per core, outside the VM, default 2)
and starts a VM (2 schedulers) running the 75/25 split (xb_split) next to
the broker (xb_broker: gen_server calls and casts of mid-sized terms), then
runs ROUNDS rounds of one erlang-sample --capture perf run per setting,
shuffled per round (seeded, printed).  The drain loop's settings are
compared reading later (--perf-read later: the live read comes from the
drain loop, so how it gets the CPU decides the skid), and next to them the
perf path's default, reading at the moment of the sample:

  default       --perf-read later: SCHED_FIFO 1 in bursts of at most 2 ms,
                then nice -10; rings drained on a timer (5 ms for a JIT,
                2 ms for the interpreter), never woken per sample
  no-realtime   --no-realtime: the same timer at normal priority
  drain-1       --drain-ms 1: the default priority, drained every 1 ms
  drain-10      --drain-ms 10
  wakeup-1      --wakeup 1: woken by the kernel after every sample
  at-sample     --perf-read sample (the perf path's default where
                SCHED_FIFO is allowed): a reader per CPU copies each
                sample's process and stack before the thread runs on

For each run: samples the kernel lost; samples whose callers could not be
read ([callers unknown]: the process was switched out or moved before the
live read); the hot_a share of the 75/25 split (a setting that moves where
samples land shows here); skid p50 and p99 (sample to live read); the
sampler's CPU per processed sample; and the CPU the VM's schedulers got
during the run (schedstat), relative to the default in the same round
(what the sampler takes from the VM).  Printed: medians over rounds, and
each setting's ratios to the default.

Exit status: 0 when every run worked (whatever the figures), 1 when a tool
failed or a run printed no statistics.

Usage: python3 bench/drain_bench.py [--rounds N] [--seconds S] [--hogs N]
       [--seed S] [--vm NAME]...   (VM names as pytest --vm; default
       stock, and otp25-emu-dwarf when tests/build-vms.sh built it)
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
import xbsample  # noqa: E402

LATER = ["--perf-read", "later"]
SETTINGS = [
    ("default", LATER),
    ("no-realtime", LATER + ["--no-realtime"]),
    ("drain-1", LATER + ["--drain-ms", "1"]),
    ("drain-10", LATER + ["--drain-ms", "10"]),
    ("wakeup-1", LATER + ["--wakeup", "1"]),
    ("at-sample", ["--perf-read", "sample"]),
]
ROW = re.compile(r"^\s*(\d+)\s+(.+?)\s+(\d+\.\d+)%\s+(\[.*\])$")
SKID = re.compile(r"^skid \(sample -> VM memory read, us\): p50 (\d+)\s+p90 (\d+)\s+p99 (\d+)", re.M)


class ToolFailed(Exception):
    pass


def one_run(tool, vm, seconds, extra):
    cpu0 = sum(xbsample.scheduler_cpu_ns(vm).values())
    p = subprocess.run([tool, "-v", "--skid-summary", "-t", "400", "-d", str(seconds), "--capture", "perf"]
                       + extra + [str(vm.pid)], capture_output=True, text=True)
    vm_cpu = (sum(xbsample.scheduler_cpu_ns(vm).values()) - cpu0) / 1e9
    st = xbtest.sample_stats(p.stderr)
    c = re.search(r"cpu: [0-9.]+ s before sampling, ([0-9.]+) s while sampling", p.stderr)
    if p.returncode != 0 or not st or not c or st["processed"] == 0 or st["partial"] is None:
        raise ToolFailed("erlang-sample %s failed (exit %s):\n%s" % (" ".join(extra), p.returncode,
                                                                   p.stderr[-2000:]))
    a = b = 0
    for line in p.stdout.splitlines():
        m = ROW.match(line)
        if m and m.group(2) == "xb_split:hot_a/1":
            a = int(m.group(1))
        elif m and m.group(2) == "xb_split:hot_b/1":
            b = int(m.group(1))
    sk = SKID.search(p.stdout)
    pr = st["processed"]
    return {
        "lost %": 100.0 * st["lost"] / (st["received"] + st["lost"]),
        "callers unknown %": 100.0 * st["partial"] / pr,
        "hot_a %": 100.0 * a / (a + b) if a + b else float("nan"),
        "skid p50 ms": int(sk.group(1)) / 1000.0 if sk else float("nan"),
        "skid p99 ms": int(sk.group(3)) / 1000.0 if sk else float("nan"),
        "sampler us/sample": 1e6 * float(c.group(1)) / pr,
        "VM CPU s": vm_cpu,
    }


def bench_vm(a, rng, tool, target):
    runs = {name: [] for name, _ in SETTINGS}
    with xbtest.VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        vm.eval("xb_broker:start()")
        time.sleep(1.5)
        with xbsample.Hogs(a.hogs):
            for r in range(a.rounds):
                order = list(SETTINGS)
                rng.shuffle(order)
                for name, extra in order:
                    runs[name].append(one_run(tool, vm, a.seconds, extra))
                print("drain_bench: %s: round %d/%d (%s)" % (target.name, r + 1, a.rounds,
                                                          " ".join(n for n, _ in order)), flush=True)
    keys = list(runs["default"][0].keys())
    print("drain_bench: %s (%s), %d hogs per core, %d rounds of %.1f s per setting; medians, and "
          "the ratio to the default in the same rounds" % (target.name, "JIT" if target.jit else
                                                           "interpreter", a.hogs, a.rounds, a.seconds))
    print("    %-12s" % "setting" + "".join("%20s" % k for k in keys))
    for name, _ in SETTINGS:
        med = {k: statistics.median(x[k] for x in runs[name]) for k in keys}
        print("    %-12s" % name + "".join("%20.2f" % med[k] for k in keys))
    for name, _ in SETTINGS[1:]:
        cells = []
        for k in keys:
            ratios = [x[k] / d[k] for x, d in zip(runs[name], runs["default"]) if d[k]]
            cells.append("%20s" % ("%.2f" % statistics.median(ratios) if ratios else "-"))
        print("    %-12s" % (name + " / def") + "".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vm", action="append")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    print("drain_bench: seed %d" % a.seed)
    tool = xbtest.tool_path("erlang-sample")
    targets = []
    for name in a.vm or ["stock", "otp25-emu-dwarf"]:
        t = xbtest.load_target(name)
        if t.missing:
            if a.vm:  # named: it must be there
                print("drain_bench: VM %s: %s" % (name, t.missing))
                return 1
            print("drain_bench: VM %s skipped: %s" % (name, t.missing))
            continue
        targets.append(t)
    try:
        for t in targets:
            bench_vm(a, rng, tool, t)
    except ToolFailed as e:
        print("drain_bench: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
