#!/usr/bin/python3
"""capture_bench - what each capture path costs the VM it samples, and the
sampler itself.

Part 1, throughput.  Starts Debian's stock VM with ONE scheduler running
xb_bench (a counted loop of fixed work units), all VM threads pinned to
CPU 0 and the samplers to CPU 1, and runs ROUNDS rounds of five windows of
W seconds, shuffled per round (seeded, printed):

  unsampled      nothing attached
  perf           erlang-sample -F 997 --capture perf  (registers + 16 KiB
                 user stack per sample from perf; the process and its
                 Erlang stack read at the moment of the sample by a
                 reader on the VM's CPU, which the sampled thread waits for)
  perf-later     ... --capture perf --perf-read later  (read live a moment
                 later by the drain loop on CPU 1; nobody waits)
  bpf            erlang-sample -F 997 --capture bpf   (a BPF program copies
                 registers, user stack, the process and its stack tail at
                 the moment of the sample)
  floor          build/events_only --floor: cpu-clock, IP only, scheduler
                 thread only -- the bare sampling interrupt

A window's loss is 1 - rate / (the unsampled rate of the same round), the
rate being work units per second of wall time (the VM has CPU 0 to
itself, so whatever runs there for the sampler, the perf path's reader
included, is time the VM loses), scaled by window / time actually
sampled.  Printed: medians over rounds with bootstrap 95 % intervals, each
also as VM time per sample; the same per CPU-second of the scheduler
thread (what the thread's own run loses: the interrupt and the BPF
program run in it, the reader does not); the per-round difference bpf -
perf (target: at most 0.5 points); sampler CPU per processed sample for
each path.

Part 2, a broker.  The xb_broker workload (gen_server calls and casts of
mid-sized terms) on a 2-scheduler VM, the stock JIT and the interpreter
(otp25-emu-dwarf): erlang-sample on each path for --broker-seconds,
sampler CPU per processed sample (target <= 25 us).

Exit status: 0 when every run of the tools worked (targets met or not: the
figures are printed with PASS/NOT met), 1 when a tool failed.

Usage: python3 bench/capture_bench.py [--rounds N] [--window-seconds W]
       [--freq HZ] [--seed S] [--no-pin] [--broker-seconds S] [--no-broker | --broker-only]
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


class ToolFailed(Exception):
    pass


def ci95(values, rng, n=2000):
    """Bootstrap 95 % interval of the median."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"),) * 2
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def run_sample(pin, tool, pid, freq, seconds, capture):
    """One erlang-sample run: (processed, received, sampling CPU s, sampled s).
    CAPTURE: bpf, perf, or perf-later (--capture perf --perf-read later)."""
    args = ["--capture", "perf", "--perf-read", "later"] if capture == "perf-later" else ["--capture", capture]
    p = subprocess.run(pin + [tool, "-v", "-F", str(freq), "-d", str(seconds)] + args + [str(pid)],
                       capture_output=True, text=True)
    m = re.match(r"processed (\d+)/(\d+)", p.stdout)
    c = re.search(r"cpu: [0-9.]+ s before sampling, ([0-9.]+) s while sampling", p.stderr)
    e = re.search(r": ([0-9.]+) s; received", p.stderr)
    cap = re.search(r"capture (\w+) \(faults", p.stderr)
    if p.returncode != 0 or not (m and c and e and cap):
        raise ToolFailed("erlang-sample --capture %s failed (exit %s):\n%s" % (capture, p.returncode,
                                                                           p.stderr[-2000:]))
    if cap.group(1) != capture.split("-")[0]:
        raise ToolFailed("asked for --capture %s, got %s" % (capture, cap.group(1)))
    if capture == "perf" and "reads at the moment of the sample" not in p.stderr:
        raise ToolFailed("--capture perf did not read at the moment of the sample:\n" + p.stderr[-2000:])
    return int(m.group(1)), int(m.group(2)), float(c.group(1)), float(e.group(1))


def throughput(a, rng, tool, events_only):
    W = a.window_seconds
    with xbtest.VM(xbtest.stock_target(), schedulers=1) as vm:
        pin = [] if a.no_pin or os.cpu_count() < 2 else ["taskset", "-c", "1"]
        if pin:
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(vm.pid)], stdout=subprocess.DEVNULL,
                           check=True)
        vm.eval("xb_bench:start()")
        time.sleep(1.0)
        sched_tid = [t for t in os.listdir("/proc/%d/task" % vm.pid)
                     if open("/proc/%d/task/%s/comm" % (vm.pid, t)).read().strip() == "1_scheduler"][0]

        def state():
            with open("/proc/%d/task/%s/schedstat" % (vm.pid, sched_tid)) as f:
                cpu = int(f.read().split()[0]) / 1e9
            return int(vm.eval("xb_bench:count()")), cpu, time.monotonic()

        loss = {"perf": [], "perf-later": [], "bpf": [], "floor": []}
        loss_cpu = {k: [] for k in loss}  # per CPU-second of the scheduler thread
        cpu = {"perf": 0.0, "perf-later": 0.0, "bpf": 0.0}
        processed = {k: 0 for k in cpu}
        received = {k: 0 for k in cpu}
        for _ in range(a.rounds):
            order = ["unsampled"] + list(loss)
            rng.shuffle(order)
            rate, rate_cpu, sampled, window = {}, {}, {}, {}
            for kind in order:
                c0, s0, t0 = state()
                if kind == "unsampled":
                    time.sleep(W)
                elif kind in cpu:
                    pr, rc, cs, ss = run_sample(pin, tool, vm.pid, a.freq, W, kind)
                    processed[kind] += pr
                    received[kind] += rc
                    cpu[kind] += cs
                    sampled[kind] = ss
                else:
                    p = subprocess.run(pin + [events_only, "--floor", "-F", str(a.freq), "-d", str(W),
                                              str(vm.pid)], capture_output=True, text=True)
                    m = re.match(r"received (\d+) samples in ([0-9.]+) s", p.stdout)
                    if p.returncode != 0 or not m:
                        raise ToolFailed("events_only --floor failed:\n" + p.stderr[-2000:])
                    sampled[kind] = float(m.group(2))
                c1, s1, t1 = state()
                rate[kind] = (c1 - c0) / (t1 - t0)
                rate_cpu[kind] = (c1 - c0) / (s1 - s0)
                window[kind] = t1 - t0
            for kind in loss:
                frac = min(1.0, sampled[kind] / window[kind])
                loss[kind].append((1.0 - rate[kind] / rate["unsampled"]) / frac)
                loss_cpu[kind].append((1.0 - rate_cpu[kind] / rate_cpu["unsampled"]) / frac)
    print("capture_bench: throughput, stock VM, 1 scheduler, %d rounds x 5 windows of %.1f s, %d Hz, "
          "seed %d, %s" % (a.rounds, W, a.freq, a.seed,
                           "VM on CPU 0, samplers on CPU 1" if pin else "not pinned"))

    def row(label, values, note):
        m = statistics.median(values)
        lo, hi = ci95(values, rng)
        print("    %-26s %5.2f%%  [%5.2f, %5.2f]  %5.1f us/sample  %s" %
              (label, 100 * m, 100 * lo, 100 * hi, 1e6 * m / a.freq, note))
    print("  VM throughput lost, per second of wall time:")
    row("--capture perf:", loss["perf"], "read at the sample (the thread waits)")
    row("--perf-read later:", loss["perf-later"], "read live later")
    row("--capture bpf:", loss["bpf"], "")
    row("floor (interrupt only):", loss["floor"], "cpu-clock, IP only")
    print("  the same per CPU-second of the scheduler thread (its own run only):")
    for k, label in (("perf", "--capture perf:"), ("perf-later", "--perf-read later:"), ("bpf", "--capture bpf:"),
                     ("floor", "floor:")):
        row(label, loss_cpu[k], "")
    diff = [b - p for b, p in zip(loss["bpf"], loss["perf"])]
    row("bpf - perf (per round):", diff, "target <= 0.50 points")
    d = statistics.median(diff)
    us = {k: 1e6 * cpu[k] / processed[k] if processed[k] else float("inf") for k in cpu}
    for k in ("perf", "perf-later", "bpf"):
        print("    sampler CPU per processed sample, %s: %.1f us (processed %d of %d)" %
              (k, us[k], processed[k], received[k]))
    print("  %s: bpf costs %.2f points more than perf (target <= 0.5: ratio %.2f)" %
          ("PASS" if d <= 0.005 else "NOT met", 100 * d, d / 0.005 if d > 0 else 0.0))


def broker(a, tool):
    """The broker on the JIT (stock) and the interpreter (otp25-emu-dwarf,
    when tests/build-vms.sh has built it; said otherwise)."""
    met = True
    for target in (xbtest.stock_target(), xbtest.load_target("otp25-emu-dwarf")):
        if not target.present:
            print("capture_bench: the xb_broker workload: %s not measured (%s)" % (target.name, target.missing))
            continue
        out = {}
        with xbtest.VM(target, schedulers=2) as vm:
            vm.eval("xb_broker:start()")
            time.sleep(1.5)
            for cap in ("perf", "perf-later", "bpf"):
                pr, rc, cs, _ = run_sample([], tool, vm.pid, a.freq, a.broker_seconds, cap)
                out[cap] = (pr, rc, 1e6 * cs / pr if pr else float("inf"))
        print("capture_bench: the xb_broker workload, %s (%s), 2 schedulers, %.0f s per path, %d Hz" %
              (target.name, target.flavor, a.broker_seconds, a.freq))
        for cap, (pr, rc, us) in out.items():
            print("    %-10s processed %d of %d; sampler CPU %.1f us per processed sample (target <= 25 us: "
                  "%s, ratio %.2f)" % (cap, pr, rc, us, "PASS" if us <= 25 else "NOT met", us / 25))
        met = met and out["bpf"][2] <= 25
    return met


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--window-seconds", type=float, default=1.5)
    ap.add_argument("--freq", type=int, default=997)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("--broker-seconds", type=float, default=10)
    ap.add_argument("--no-broker", action="store_true")
    ap.add_argument("--broker-only", action="store_true")
    a = ap.parse_args()
    tool = xbtest.tool_path("erlang-sample")
    events_only = os.path.join(os.path.dirname(tool), "events_only")
    if not os.path.exists(events_only):
        print("capture_bench: %s is missing; run ./build.sh" % events_only)
        return 1
    rng = random.Random(a.seed)
    try:
        if not a.broker_only:
            throughput(a, rng, tool, events_only)
        if not a.no_broker:
            broker(a, tool)
    except ToolFailed as e:
        print("capture_bench: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
