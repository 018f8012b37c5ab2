"""The workloads in tests/workloads/ do what their headers promise, checked
from inside the VM (process_info), independently of our tools.  The sampler
tests rely on these properties."""

import os
import re
import shutil

from xbtest import VM, check, log, no_asan, per_vm, run_cmd, skip_because, tmpdir
from xbsample import SplitClock, wait_running

TARGETS = ["stock", "otp25-emu-dwarf"]


def ints(text):
    return [int(x) for x in re.findall(r"-?\d+", text)]


def sample_expr(name, n, ms, what):
    return ("begin P = whereis(%s), [begin timer:sleep(%d), element(2, process_info(P, %s)) end "
            "|| _ <- lists:seq(1, %d)] end" % (name, ms, what, n))


@no_asan("checks the workload from inside the VM and with perf: none of our tools runs")
@per_vm(only=TARGETS)
def test_split_always_busy_in_its_functions(target):
    """In-VM view: the process never waits and is in hot_a/1, hot_b/1, or
    phase/2 and the clock and counter BIFs it calls between them
    (process_info's current_function is biased towards where the process
    yields, so the split is checked with perf)."""
    with VM(target) as vm:
        vm.start_workload("xb_split", 80)
        wait_running(vm, "xb_split")
        res = vm.eval("S = " + sample_expr("xb_split", 200, 5, "current_function") + ", "
                      "{length([x || {xb_split, hot_a, 1} <- S]), "
                      "length([x || {xb_split, hot_b, 1} <- S]), "
                      "length([x || {M, F, _} <- S, lists:member({M, F}, [{xb_split, phase}, "
                      "{erlang, monotonic_time}, {atomics, add}])]), length(S)}", timeout=60)
        a, b, bif, n = ints(res)
        log("process_info current_function: hot_a %d, hot_b %d, phase/2 and its BIFs %d, of %d"
            % (a, b, bif, n))
        check(a + b + bif >= 0.95 * n, "xb_split was elsewhere in %d of %d samples"
              % (n - a - b - bif, n))
        st = vm.eval("lists:usort([element(2, process_info(whereis(xb_split), status)) || "
                     "_ <- lists:seq(1, 100)])")
        check("waiting" not in st, "xb_split was seen waiting: %s" % st)


@no_asan("checks the workload from inside the VM and with perf: none of our tools runs")
@per_vm(flavor="jit", only=["stock", "otp25-jit-dwarf"])
def test_split_ratio_seen_by_perf(target):
    """OS-level view: perf (cpu-clock) with the VM's own +JPperf map sees
    hot_a/1 : hot_b/1 = 80 : 20 for xb_split:start(80)."""
    perf = shutil.which("perf")
    if not perf:
        skip_because("needs-package", target, "perf (linux-perf) is not installed; "
                     "tests/run-all.sh installs it")
    with VM(target, ["+JPperf", "map"]) as vm:
        try:
            vm.start_workload("xb_split", 80)
            wait_running(vm, "xb_split")
            data = os.path.join(tmpdir(), "perf.data")
            clock = SplitClock(vm, nominal=80, cpu=target)
            r = run_cmd([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "-p", str(vm.pid),
                         "-o", data, "--", "sleep", "2"], timeout=30)
            truth = clock.share() / 100
            check(r.rc == 0, "perf record does not work here", r.describe())
            r = run_cmd([perf, "script", "-i", data, "-F", "ip,sym"], timeout=60)
            check(r.rc == 0, "perf script failed", r.describe())
            syms = [l.strip().partition(" ")[2] for l in r.out.splitlines() if l.strip()]
            a = sum(1 for s in syms if s.endswith("xb_split:hot_a/1"))
            b = sum(1 for s in syms if s.endswith("xb_split:hot_b/1"))
            n = len(syms)
            log("perf: %d samples, hot_a/1 %d, hot_b/1 %d, elsewhere %d (C code of the clock "
                "BIF, ...)" % (n, a, b, n - a - b))
            check(n >= 500, "only %d samples" % n)
            check(a + b >= 0.6 * n, "only %d of %d samples in hot_a/hot_b" % (a + b, n))
            frac = a / (a + b)
            # perf agrees with the workload's own clock (80/20 when a unit
            # of work costs the same in both functions, as on most CPUs)
            check(abs(frac - truth) <= 0.08, "hot_a share %.3f by perf, %.3f by xb_split's own clock"
                  % (frac, truth))
        finally:
            try:
                os.unlink("/tmp/perf-%d.map" % vm.pid)
            except OSError:
                pass


@no_asan("checks the workload from inside the VM and with perf: none of our tools runs")
@per_vm(only=TARGETS)
def test_deep_keeps_its_frames(target):
    with VM(target) as vm:
        vm.start_workload("xb_deep")
        wait_running(vm, "xb_deep")
        st = vm.eval("{current_stacktrace, S} = process_info(whereis(xb_deep), "
                     "current_stacktrace), [{F, A} || {xb_deep, F, A, _} <- S]")
        names = re.findall(r"\{(\w+),(\d+)\}", st)
        log("xb_deep stack: %s" % st)
        check([n for n, _ in names][:5] == ["leaf", "d", "c", "b", "a"],
              "xb_deep's stack is %s, expected leaf, d, c, b, a" % st)
        st2 = vm.eval("[element(2, process_info(whereis(xb_deep), status)) || "
                      "_ <- lists:seq(1, 50)]")
        check("waiting" not in st2, "xb_deep was seen waiting")


@no_asan("checks the workload from inside the VM and with perf: none of our tools runs")
@per_vm(only=TARGETS)
def test_copy_sends_in_send_loop(target):
    with VM(target) as vm:
        vm.start_workload("xb_copy")
        wait_running(vm, "xb_sender")
        res = vm.eval("S = " + sample_expr("xb_sender", 200, 5, "current_function") + ", "
                      "W = [element(2, process_info(whereis(xb_sender), status)) "
                      "|| _ <- lists:seq(1, 100)], "
                      "Q = [element(2, process_info(whereis(xb_receiver), message_queue_len)) "
                      "|| _ <- lists:seq(1, 20)], "
                      "{length([x || {xb_copy, send_loop, 2} <- S]), "
                      "length([x || {erlang, F, _} <- S, F =:= bif_return_trap orelse F =:= send]), "
                      "length(S), "
                      "length([x || waiting <- W]), lists:max(Q)}", timeout=60)
        inloop, trap, n, waiting, maxq = ints(res)
        log("xb_sender current_function: send_loop/2 %d, erlang:send/2 or "
            "erlang:bif_return_trap/2 (a yielding send) %d, of %d; waiting %d of 100; "
            "receiver queue max %d"
            % (inloop, trap, n, waiting, maxq))
        check(inloop + trap >= 0.9 * n, "xb_sender elsewhere in %d of %d samples"
              % (n - inloop - trap, n))
        check(waiting <= 10, "xb_sender was waiting in %d of 100 samples" % waiting)
        check(maxq <= 300, "the receiver's queue grew to %d" % maxq)


@no_asan("checks the workload from inside the VM and with perf: none of our tools runs")
@per_vm(only=TARGETS)
def test_gc_collects_often(target):
    with VM(target) as vm:
        vm.start_workload("xb_gc")
        wait_running(vm, "xb_alloc")
        res = vm.eval("P = whereis(xb_alloc), {garbage_collection, G0} = process_info(P, "
                      "garbage_collection), N0 = xb_gc:gcs(), timer:sleep(1000), N1 = xb_gc:gcs(), "
                      "{current_function, F} = process_info(P, current_function), "
                      "{N1 - N0, F}")
        m = re.match(r"\{(\d+),\{(\w+),(\w+),(\d+)\}\}", res)
        check(m, "unexpected answer %s" % res)
        n = int(m.group(1))
        log("VM-wide GCs in 1 s with xb_alloc running: %d; xb_alloc in %s:%s/%s"
            % ((n,) + m.groups()[1:]))
        check(n >= 100, "only %d GCs in a second" % n)
        check(m.group(3) == "alloc_loop", "xb_alloc is in %s, not alloc_loop/1" % m.group(3))
