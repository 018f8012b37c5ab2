#!/usr/bin/python3
"""sample_bench - what erlang-sample costs the VM it samples, and itself.

Starts Debian's stock VM with ONE scheduler running xb_bench (a counted
loop of fixed work units), all VM threads pinned to CPU 0 and the samplers
to CPU 1, and measures in one run ROUNDS rounds of six windows of W
seconds each, in a shuffled order per round (seeded, printed):

  unsampled       nothing attached
  erlang-sample   erlang-sample -F 997 (defaults otherwise)
  events-only     build/events_only: the very perf events erlang-sample
                  opens (same attributes, rings, 5 ms drains), every sample
                  thrown away -- the kernel's share of the cost
  floor           build/events_only --floor: the cheapest sampling event
                  there is (cpu-clock, IP only, scheduler thread only) --
                  what the sampling interrupt alone costs on this machine
  floor x2, x4    the same at twice and four times the rate: the cost per
                  sample should not change, and is measured more precisely
  perf record     stock `perf record -e cpu-clock -F 997 -p PID` (IP, TID,
                  time): the bar, with nothing to unwind
  perf -g dwarf   the same with `--call-graph dwarf` (registers and an 8 KiB
                  stack copy per sample): perf doing erlang-sample's sampling
  (the two perf windows only when Debian's linux-perf works here)

Rates are work units per CPU-second of the scheduler thread (schedstat),
which the hypervisor taking CPU 0 away does not move.  A window's loss is
1 - rate / (the unsampled rate of the same round), scaled by
window / time-actually-sampled (start-up is not sampling).  Printed as
medians over rounds with a bootstrap 95% interval:

  loss, erlang-sample      -- the issue-3 figure (target <= 1%)
  loss, events-only        -- what the kernel alone charges for these events
  erlang-sample's own share = the difference
  sampler CPU per processed sample (target <= 20 us)
and each loss as the VM CPU time one sample costs (loss / rate), which
does not depend on the rate: the 1% target at 997 Hz means ~10 us.

Usage: python3 bench/sample_bench.py [--rounds N] [--window-seconds W]
       [--freq HZ] [--seed S] [--no-pin] [--no-perf]
"""
import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
import xbtest  # noqa: E402


def ci95(values, rng, n=2000):
    """Bootstrap 95% interval of the median."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"),) * 2
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def perf_works(pid, freq):
    """The perf binary when `perf record` works on this kernel, else None."""
    perf = shutil.which("perf")
    if not perf:
        return None
    data = "/tmp/sample_bench.%d.perf.data" % os.getpid()
    p = subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", str(freq), "-p", str(pid),
                        "-o", data, "--", "sleep", "0.1"], capture_output=True, text=True)
    ok = p.returncode == 0 and perf_span(perf, data) is not None
    return perf if ok else None


def perf_span(perf, data):
    """Seconds from the first to the last sample in a perf.data file."""
    p = subprocess.run([perf, "script", "-i", data, "-F", "time"], capture_output=True, text=True)
    times = [float(t.rstrip(":")) for t in p.stdout.split()]
    try:
        os.unlink(data)
    except OSError:
        pass
    return max(times) - min(times) if len(times) > 1 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--window-seconds", type=float, default=1.5)
    ap.add_argument("--freq", type=int, default=997)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin the VM to CPU 0 and the samplers to CPU 1")
    ap.add_argument("--no-perf", action="store_true",
                    help="leave out the stock perf record windows")
    a = ap.parse_args()
    tool = xbtest.tool_path("erlang-sample")
    events_only = os.path.join(os.path.dirname(tool), "events_only")
    if not os.path.exists(events_only):
        print("sample_bench: %s is missing; run ./build.sh" % events_only)
        return 1
    rng = random.Random(a.seed)
    W = a.window_seconds
    target = xbtest.stock_target()
    perf_data = "/tmp/sample_bench.%d.perf.data" % os.getpid()
    with xbtest.VM(target, schedulers=1) as vm:
        pin = [] if a.no_pin or os.cpu_count() < 2 else ["taskset", "-c", "1"]
        if pin:
            # On a 2-CPU machine: the cost of sampling itself, not two
            # programs fighting over one core.
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(vm.pid)],
                           stdout=subprocess.DEVNULL, check=True)
        vm.eval("xb_bench:start()")
        time.sleep(1.0)  # warm up
        sched_tid = None
        for tid in os.listdir("/proc/%d/task" % vm.pid):
            with open("/proc/%d/task/%s/comm" % (vm.pid, tid)) as f:
                if f.read().strip() == "1_scheduler":
                    sched_tid = tid

        def state():
            with open("/proc/%d/task/%s/schedstat" % (vm.pid, sched_tid)) as f:
                cpu = int(f.read().split()[0]) / 1e9
            return int(vm.eval("xb_bench:count()")), cpu, time.monotonic()

        loss = {"erlang-sample": [], "events-only": [], "floor": [], "floor x2": [], "floor x4": []}
        perf = None if a.no_perf else perf_works(vm.pid, a.freq)
        if perf:
            loss["perf record"] = []
            loss["perf -g dwarf"] = []
        rate_of = {"floor x2": 2 * a.freq, "floor x4": 4 * a.freq}
        cpu_sampling = 0.0
        cpu_startup = 0.0
        processed_total = received_total = 0
        events_received = 0
        event_name = "?"
        for rnd in range(a.rounds):
            order = ["unsampled"] + list(loss)
            rng.shuffle(order)
            rate, sampled_s, window_s = {}, {}, {}
            for kind in order:
                c0, s0, t0 = state()
                if kind == "unsampled":
                    time.sleep(W)
                elif kind == "erlang-sample":
                    p = subprocess.run(pin + [tool, "-v", "-F", str(a.freq), "-d", str(W), str(vm.pid)],
                                       capture_output=True, text=True)
                    m = re.match(r"processed (\d+)/(\d+)", p.stdout)
                    c = re.search(r"cpu: ([0-9.]+) s before sampling, ([0-9.]+) s while sampling", p.stderr)
                    e = re.search(r": ([0-9.]+) s; received", p.stderr)
                    ev = re.search(r"event (\S+) at", p.stderr)
                    if p.returncode != 0 or not (m and c and e):
                        print("sample_bench: erlang-sample failed (exit %d) or printed no "
                              "statistics:\n%s" % (p.returncode, p.stderr))
                        return 1
                    processed_total += int(m.group(1))
                    received_total += int(m.group(2))
                    cpu_startup += float(c.group(1))
                    cpu_sampling += float(c.group(2))
                    sampled_s[kind] = float(e.group(1))
                    event_name = ev.group(1) if ev else event_name
                elif kind.startswith("perf"):
                    graph = ["--call-graph", "dwarf"] if kind == "perf -g dwarf" else []
                    p = subprocess.run(pin + [perf, "record", "-q", "-e", "cpu-clock", "-F", str(a.freq)] +
                                       graph + ["-p", str(vm.pid), "-o", perf_data, "--", "sleep", str(W)],
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        print("sample_bench: perf record failed:\n" + p.stderr)
                        return 1
                else:
                    floor = ["--floor"] if kind.startswith("floor") else []
                    hz = rate_of.get(kind, a.freq)
                    p = subprocess.run(pin + [events_only] + floor + ["-F", str(hz), "-d", str(W), str(vm.pid)],
                                       capture_output=True, text=True)
                    m = re.match(r"received (\d+) samples in ([0-9.]+) s", p.stdout)
                    if p.returncode != 0 or not m:
                        print("sample_bench: events_only failed (exit %d):\n%s"
                              % (p.returncode, p.stderr))
                        return 1
                    if kind == "events-only":
                        events_received += int(m.group(1))
                    sampled_s[kind] = float(m.group(2))
                c1, s1, t1 = state()
                if kind.startswith("perf"):
                    # Outside the window: how long perf really sampled.
                    sampled_s[kind] = perf_span(perf, perf_data)
                    if not sampled_s[kind]:
                        print("sample_bench: perf record wrote no samples")
                        return 1
                rate[kind] = (c1 - c0) / (s1 - s0)
                window_s[kind] = t1 - t0
            for kind in loss:
                frac = min(1.0, sampled_s[kind] / window_s[kind])
                loss[kind].append((1.0 - rate[kind] / rate["unsampled"]) / frac)
    if not processed_total or not events_received:
        print("sample_bench: no samples (erlang-sample processed %d, events_only received %d)"
              % (processed_total, events_received))
        return 1
    med = {k: statistics.median(v) for k, v in loss.items()}
    ci = {k: ci95(v, rng) for k, v in loss.items()}
    own = [x - y for x, y in zip(loss["erlang-sample"], loss["events-only"])]
    us_per = 1e6 * cpu_sampling / processed_total if processed_total else float("inf")
    print("sample_bench: %s VM, 1 scheduler, %d rounds x %d windows of %.1f s, %d Hz, event %s, seed %d" %
          (target.name, a.rounds, len(loss) + 1, W, a.freq, event_name, a.seed))
    print("  pinned: %s" % ("VM on CPU 0, samplers on CPU 1" if pin else "no"))
    print("  loss per sampled second (work per scheduler CPU-second; median, 95% CI),")
    print("  and the VM CPU one sample costs (loss / rate; 1%% at %d Hz is %.1f us):" %
          (a.freq, 1e6 * 0.01 / a.freq))

    def row(label, values, note, hz=a.freq):
        m = statistics.median(values)
        lo, hi = ci95(values, rng)
        print("    %-24s %5.2f%%  [%5.2f, %5.2f]  %5.1f us/sample [%4.1f, %4.1f]  %s" %
              (label, 100 * m, 100 * lo, 100 * hi, 1e6 * m / hz, 1e6 * lo / hz, 1e6 * hi / hz, note))
    row("erlang-sample:", loss["erlang-sample"],
        "target <= 1%% (ratio to target %.2f)" % (med["erlang-sample"] / 0.01))
    row("events only (kernel):", loss["events-only"], "same perf events, samples discarded")
    row("floor (interrupt only):", loss["floor"], "cpu-clock, IP only, scheduler thread only")
    row("floor at %d Hz:" % (2 * a.freq), loss["floor x2"], "the same at twice the rate", 2 * a.freq)
    row("floor at %d Hz:" % (4 * a.freq), loss["floor x4"], "the same at four times the rate", 4 * a.freq)
    row("erlang-sample's own:", own, "per-round difference erlang-sample - events only")
    if perf:
        row("perf record:", loss["perf record"], "stock perf, cpu-clock, IP/TID/time, all threads")
        row("perf record -g dwarf:", loss["perf -g dwarf"], "the same with registers + 8 KiB stack copies")
    else:
        print("    (stock perf record windows skipped: %s)" %
              ("--no-perf" if a.no_perf else "perf record does not work here (install linux-perf)"))
    print("  samples: erlang-sample processed %d of %d received; events-only received %d" %
          (processed_total, received_total, events_received))
    print("  sampler CPU per processed sample: %.1f us  (target <= 20 us; ratio to target %.2f)" %
          (us_per, us_per / 20.0))
    print("  start-up CPU per run (attach, code map; not per sample): %.1f ms" %
          (1000 * cpu_startup / a.rounds))
    ok_loss = med["erlang-sample"] <= 0.01
    ok_cpu = us_per <= 20.0
    floor_us = 1e6 * statistics.median(loss["floor x4"]) / (4 * a.freq)
    if not ok_loss and floor_us > 1e6 * 0.01 / a.freq:
        print("  note: the sampling interrupt alone costs the VM %.1f us per sample here (floor at %d Hz), "
              "more than the %.1f us the 1%% target allows at %d Hz: no perf_event sampler can meet it "
              "on this machine" % (floor_us, 4 * a.freq, 1e6 * 0.01 / a.freq, a.freq))
    elif not ok_loss and med["events-only"] > 0.01:
        print("  note: the kernel's share alone (%.2f%%) is above the 1%% target on this machine: "
              "no sampler using these events can meet it here" % (100 * med["events-only"]))
    print("%s: loss %s, CPU per sample %s" % ("PASS" if ok_loss and ok_cpu else "FAIL",
                                               "met" if ok_loss else "NOT met",
                                               "met" if ok_cpu else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
