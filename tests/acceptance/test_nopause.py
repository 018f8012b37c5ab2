"""No pause, proven (issue 11).  gdb -p and py-spy dump stop the process
they look at; our tools must not.

Two witnesses, in windows of the same run (3 rounds of: a baseline window
with nothing attached, then one window per tool mode: sampling, --pstack
and --check in a loop, erlang-write-perf-map in a loop, erlang-heapsample
(processes, --alloc) in a loop, then a control
that stops the VM for 100 ms: SIGSTOP, SIGCONT):
  - a process inside the VM (xb_jitter) sleeps 1 ms at a time and records
    how late each wakeup comes.  The baseline's noise is the median of the
    baseline windows' worst lateness; the limit max(30 ms, 1.5 x noise)
    (a drain loop computing at SCHED_FIFO for 45-55 ms, once per run,
    was caught so: session.c's RT bursts).
    A tool mode fails when the median of its windows' worst lateness is
    above the limit; the same rule must catch the control (on a machine so
    noisy that its baseline hides a 100 ms stop, this witness proves
    nothing and the test says so: shared CI machines see stalls of 100 ms
    and more with nothing attached, which one window's worst cannot tell
    from a pause);
    The modes that start a tool again and again (--pstack, --check, the
    perf map, erlang-heapsample) are held against a spawn control too: /bin/true started as
    often, in a window of its own.  On a saturated machine starting
    processes alone delays the VM's wakeups: /bin/true in a loop gave worst
    lateness of 105 and 170 ms in windows where the baseline's was 10-43 ms
    (and erlang-write-perf-map's 67 ms failed a saturated soak run), so for
    those modes the limit is also at least 1.5 x the spawn control's median;
  - the VM's threads, read from /proc every 2 ms: none may ever be seen
    stopped ('T' or 't') while a tool runs; the control must be seen.
"""

import os
import signal
import threading
import time

from xbtest import VM, check, log, no_asan, per_vm, run_cmd, suite, timeout, tool_path

WINDOW = 2.0
ROUNDS = 3


def window(vm):
    """(worst lateness ms, wakeups, p99 lateness ms) since the last call."""
    text = vm.eval("xb_jitter:window()")
    mx, n, p99 = (int(x) for x in text.strip("{} \n").split(","))
    return mx / 1000.0, n, p99 / 1000.0


class StopWatcher(threading.Thread):
    """Polls the state of every thread of PID; counts stopped sightings."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stopped, self.polls, self.run_flag = pid, 0, 0, True

    def run(self):
        task = "/proc/%d/task" % self.pid
        while self.run_flag:
            try:
                for t in os.listdir(task):
                    with open("%s/%s/stat" % (task, t), "rb") as f:
                        st = f.read()
                    state = st[st.rindex(b")") + 2:st.rindex(b")") + 3]
                    if state in (b"T", b"t"):
                        self.stopped += 1
            except (OSError, ValueError):
                pass
            self.polls += 1
            time.sleep(0.002)

    def stop(self):
        self.run_flag = False
        self.join()


def watched(pid, fn):
    w = StopWatcher(pid)
    w.start()
    try:
        r = fn()
    finally:
        w.stop()
    return r, w.stopped, w.polls


def run_paced(seconds, argv, rate):
    """Run ARGV about RATE times a second for SECONDS (the spawn control)."""
    t0 = time.monotonic()
    runs = 0
    while time.monotonic() < t0 + seconds:
        run_cmd(argv, timeout=60)
        runs += 1
        ahead = t0 + runs / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    return runs


def run_for(seconds, argv):
    """Run ARGV again and again for SECONDS (a sampling run: once, for as
    long); ARGV may be a list of command lines, run in turn."""
    argvs = argv if argv and isinstance(argv[0], list) else [argv]
    t_end = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < t_end:
        argv = argvs[runs % len(argvs)]
        r = run_cmd(argv, timeout=60)
        check(r.rc in (0, 1), "%s: exit %s" % (" ".join(argv[:2]), r.rc), r.describe())
        runs += 1
    return runs


@per_vm(only=["stock"])
@timeout(400)
@no_asan("timing: the sanitized tool is 2-3x slower; the code paths run sanitized in other tests")
def test_tools_do_not_pause_the_vm(target):
    nopause(target)


@per_vm(only=["otp25-emu-dwarf", "otp29-jit"])
@suite("matrix")
@timeout(400)
def test_tools_do_not_pause_the_vm_matrix(target):
    """The same on the interpreter and on OTP 29 (a minute each: matrix only)."""
    nopause(target)


def nopause(target):
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")  # a busy VM: the tools have work to do
        vm.eval("xb_jitter:start(1)")
        time.sleep(1.0)
        pid = str(vm.pid)
        sample, perfmap = tool_path("erlang-sample"), tool_path("erlang-write-perf-map")
        heap = tool_path("erlang-heapsample")
        modes = [
            ("sampling", [sample, "-d", str(WINDOW), pid]),
            ("--pstack", [sample, "--pstack", pid]),
            ("--check", [sample, "--check", pid]),
            ("erlang-write-perf-map", [perfmap, "-o", "/dev/null", pid]),
            ("erlang-heapsample (processes, --alloc)", [[heap, pid], [heap, "--alloc", pid]]),
        ]
        base, res, control, spawn = [], {m[0]: [] for m in modes}, [], []
        for _ in range(ROUNDS):
            window(vm)
            _, stopped, _ = watched(vm.pid, lambda: time.sleep(WINDOW))
            base.append(window(vm) + (stopped,))
            for name, argv in modes:
                window(vm)
                runs, stopped, polls = watched(vm.pid, lambda: run_for(WINDOW, argv))
                res[name].append(window(vm) + (stopped, polls, runs))

            def stop_100ms():
                time.sleep(WINDOW / 2)
                os.kill(vm.pid, signal.SIGSTOP)
                time.sleep(0.1)
                os.kill(vm.pid, signal.SIGCONT)
                time.sleep(WINDOW / 2)

            # the spawn control, as often as the busiest looping mode
            rate = max(res[name][-1][5] for name, argv in modes[1:]) / WINDOW
            window(vm)
            runs, stopped, _ = watched(vm.pid, lambda: run_paced(WINDOW, ["/bin/true"], rate))
            spawn.append(window(vm) + (stopped, runs))

            window(vm)
            _, stopped, _ = watched(vm.pid, stop_100ms)
            control.append(window(vm) + (stopped,))
        def median(xs):
            xs = sorted(xs)
            return xs[len(xs) // 2]

        noise = median(b[0] for b in base)
        limit = max(30.0, 1.5 * noise)
        spawn_noise = median(c[0] for c in spawn)
        limit_loop = max(limit, 1.5 * spawn_noise)
        log("baseline windows, worst lateness: %s ms (median %.1f); limit %.1f ms" %
            (", ".join("%.1f" % b[0] for b in base), noise, limit))
        log("spawn control (/bin/true, %s runs): worst %s ms (median %.1f); limit for the looping modes "
            "%.1f ms" % ("/".join(str(c[4]) for c in spawn), "/".join("%.1f" % c[0] for c in spawn),
                         spawn_noise, limit_loop))
        for name, rs in res.items():
            log("%s: worst %s ms (median %.1f); p99 %s ms; stopped threads seen %d in %d polls; %d runs" % (
                name, "/".join("%.1f" % r[0] for r in rs), median(r[0] for r in rs),
                "/".join("%.2f" % r[2] for r in rs), sum(r[3] for r in rs), sum(r[4] for r in rs),
                sum(r[5] for r in rs)))
        log("control (SIGSTOP 100 ms): worst %s ms; stopped threads seen %d times" %
            ("/".join("%.1f" % c[0] for c in control), sum(c[3] for c in control)))
        # the /proc witness: never a stopped thread under a tool, always
        # under the control
        check(all(c[3] > 0 for c in control), "the /proc watcher missed a 100 ms SIGSTOP")
        for name, rs in res.items():
            check(sum(r[3] for r in rs) == 0, "%s: a thread of the VM was seen stopped" % name)
            check(all(r[1] > 100 for r in rs), "%s: the measuring process hardly woke: %s" % (name, rs))
        # the in-VM witness: on a machine so noisy that its baseline hides
        # a 100 ms stop it proves nothing either way (the /proc witness
        # above still does): said, not failed
        check(all(c[3] == 0 for c in spawn), "the /proc watcher saw a stopped VM thread under /bin/true")
        stop = median(c[0] for c in control)
        for name, rs in res.items():
            lim = limit if name == "sampling" else limit_loop
            if stop < lim:
                # the machine's own noise hides a 100 ms stop: the in-VM
                # witness proves nothing either way (the /proc one does)
                log("%s: in-VM witness inconclusive here: the machine's noise (limit %.1f ms) hides a 100 ms "
                    "stop; the /proc witness saw no stopped VM thread" % (name, lim))
                continue
            m = median(r[0] for r in rs)
            check(m < lim, "%s: worst wakeup lateness (median of %d windows) %.1f ms, above the %s "
                           "(limit %.1f ms; the control's %.1f ms)" %
                  (name, ROUNDS, m, "baseline's noise" if name == "sampling" else
                   "baseline's and the spawn control's noise", lim, stop))
