"""Thousands of threads, thread churn and long runs.

- A VM with >= 1,200 threads (200 schedulers, 1,024 dirty I/O schedulers)
  sampled under a soft fd limit of 1024: the tool raises it to the hard
  limit and samples every thread; with a hard limit of 1024 the threads
  it cannot open are reported once, with how to fix it, and the rest are
  sampled.
- Thread churn (a fake beam creating 300 short-lived threads a second):
  the sampler's thread slots stay at the peak thread count, not the
  number of threads ever seen.
- soak suite: 10 minutes at 997 Hz on a busy VM, RSS and open fds of the
  tool recorded every 10 s: flat (within 10 %) after a minute of warm-up.
"""

import os
import re
import resource
import subprocess
import time

from xbtest import (alone, asan, bpf_refused, no_asan, ROOT, VM, check, log, per_vm, run_cmd, sanitized, skip_because, suite,
                    timeout, tmpdir, tool_path)
from xbsample import loaded_functions, wait_running  # noqa: E402

SAMPLE = "erlang-sample"
BIG = ["+S", "200:2", "+SDio", "1024"]


def threads_of(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def sample_limited(pid, soft, hard, *args):
    """erlang-sample under `ulimit -Sn SOFT; ulimit -Hn HARD`."""
    cmd = "ulimit -Sn %d && ulimit -Hn %d && exec %s %s %d" % (soft, hard, tool_path(SAMPLE),
                                                              " ".join(args), pid)
    return run_cmd(["sh", "-c", cmd], timeout=120)


@per_vm(only=["stock"])
@timeout(400)
@asan("1,200 threads")
def test_1200_threads(target):
    with VM(target, schedulers=2, extra_args=BIG, start_timeout=120) as vm:
        n = threads_of(vm.pid)
        check(n >= 1200, "the VM has only %d threads" % n)
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        # soft limit 1024, hard above the thread count: raised, all sampled
        r = sample_limited(vm.pid, 1024, 8192, "-v", "-d", "3")
        check(r.rc == 0, "exit %s with %d threads" % (r.rc, n), r.describe())
        m = re.search(r"threads: (\d+) opened, (\d+) live, (\d+) slots, (\d+) unsampled", r.err)
        check(m, "no thread counts in -v", r.err)
        live, unsampled = int(m.group(2)), int(m.group(4))
        check(live >= n - 5 and unsampled == 0 and "cannot be sampled" not in r.err,
              "%d of %d threads sampled, %d unsampled under a soft limit of 1024" % (live, n, unsampled), r.err)
        names = set(re.findall(r"^\s*\d+\s+(\S+:\S+/\d+)\s+\d+\.\d+%\s+\[Erlang\]$", r.out, re.M))
        check("xb_split:hot_a/1" in names, "the busy process was not sampled among %d threads" % n, r.out)
        loaded = loaded_functions(vm, names)
        bad = sorted(x for x in names if x not in loaded)
        check(not bad, "frames that name no loaded function: %s" % bad[:5])
        log("%d threads under a soft fd limit of 1024: %d live events, %.1f s" % (n, live, r.elapsed))
        # hard limit 1024: what cannot be opened is reported once
        r = sample_limited(vm.pid, 1024, 1024, "-v", "-d", "2")
        check(r.rc == 0, "exit %s under a hard limit of 1024" % r.rc, r.describe())
        warn = [l for l in r.err.splitlines() if "cannot be sampled" in l]
        check(len(warn) == 1, "%d warnings about unsampled threads (expected one)" % len(warn), r.err)
        w = re.search(r"(\d+) of the VM's threads cannot be sampled \((\d+) are\): (.*)$", warn[0])
        check(w and "ulimit -Hn" in w.group(3), "the warning does not say how to fix it", warn[0])
        check(int(w.group(1)) + int(w.group(2)) >= n - 5,
              "%s + %s threads accounted for, of %d" % (w.group(1), w.group(2), n), warn[0])
        log(warn[0])


def build_fixture(where):
    from test_hostile import build_fixture as build   # one fake VM, one set-up
    return build(where)


def test_threads_past_the_fd_limit_mid_run():
    """Threads the VM creates mid-run after the tool's hard fd limit is
    reached: the run goes on with the threads it has, says once how many
    it cannot sample and how to fix it, and counts them in -v."""
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    fx = subprocess.Popen([exe, "grow", "40"], stdout=subprocess.PIPE, start_new_session=True)
    try:
        check(fx.stdout.readline().strip() == b"ready", "the fixture did not start")
        time.sleep(0.3)
        n0 = threads_of(fx.pid)
        # the tool's own fds, 16 it keeps for its own work (sampler.c
        # FD_HEADROOM), then a thread's fd each: a limit that holds the
        # threads at start and runs out ~1 s into the run
        r = sample_limited(fx.pid, 56 + n0, 56 + n0, "-v", "--capture", "perf", "-d", "4")
        n1 = threads_of(fx.pid)
        check(r.rc == 0, "exit %s" % r.rc, r.describe())
        check(n1 >= n0 + 100, "the fixture made only %d threads during the run" % (n1 - n0))
        warn = [l for l in r.err.splitlines() if "cannot be sampled" in l]
        check(len(warn) == 1, "%d warnings about unsampled threads (expected one)" % len(warn), r.err)
        check("ulimit -Hn" in warn[0], "the warning does not say how to fix it", warn[0])
        m = re.search(r"threads: (\d+) opened, (\d+) live, (\d+) slots, (\d+) unsampled", r.err)
        check(m, "no thread counts in -v", r.err)
        opened, unsampled = int(m.group(1)), int(m.group(4))
        check(opened >= n0 and unsampled >= 50 and opened + unsampled >= n1 - 60,
              "%d threads at start, %d at the end: %d opened, %d unsampled" % (n0, n1, opened, unsampled), r.err)
        check("fake:spin/0" in r.out, "the scheduler was not sampled", r.out + r.err)
        check("Too many open files" not in r.err, "the tool ran out of fds for its own work", r.err)
        # said when it first happened (a few threads), and the count at the end
        end = re.search(r"warning: by the end, (\d+) of the VM's threads could not be sampled \((\d+) were\)", r.err)
        check(end and int(end.group(1)) == unsampled, "no end-of-run count of the unsampled threads "
              "(-v: %d)" % unsampled, r.err)
        log("%d threads, then %d: %d opened, %d unsampled; %s; %s" % (n0, n1, opened, unsampled, warn[0],
                                                                      end.group(0)))
    finally:
        fx.kill()
        fx.wait()


def sample_env(pid, nofile, env, *args):
    """erlang-sample under `ulimit -n NOFILE` with ENV (name=value strings)
    in its environment."""
    cmd = "ulimit -n %d && exec env %s %s %s %d" % (nofile, " ".join(env), tool_path(SAMPLE), " ".join(args), pid)
    return run_cmd(["sh", "-c", cmd], timeout=180)


def thread_counts(r):
    m = re.search(r"threads: (\d+) opened, (\d+) live, (\d+) slots, (\d+) unsampled", r.err)
    check(m, "no thread counts in -v", r.err)
    return int(m.group(1)), int(m.group(2)), int(m.group(4))


def test_bpf_thread_map_full():
    """BPF capture's thread map holds as many threads as the fd limit
    allows (EXTROSPECT_BPF_THREADS=300 makes it small here): a VM that grows
    past it mid-run has the threads it has no room for counted unsampled,
    said once when it happens and at the end (they were lost in silence:
    exit 0, "0 unsampled"); a VM that has more threads than it holds at the
    start is sampled on the perf path by default, every thread (the default
    failed: "thread map entry of N: Argument list too long"), and
    --capture bpf refuses it in one line naming the fix."""
    refused = bpf_refused()
    if refused:
        skip_because("no-bpf", detail=refused)
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    small = "EXTROSPECT_BPF_THREADS=300"
    # 200 threads, then 100 a second up to 700
    fx = subprocess.Popen([exe, "many", "200", "100", "700"], stdout=subprocess.PIPE, start_new_session=True)
    try:
        check(fx.stdout.readline().strip() == b"ready", "the fixture did not start")
        n0 = threads_of(fx.pid)
        r = sample_env(fx.pid, 4096, [small], "-v", "--capture", "bpf", "-d", "2")
        n1 = threads_of(fx.pid)
        check(r.rc == 0, "--capture bpf, %d threads growing: exit %s" % (n0, r.rc), r.describe())
        check(n1 > 300, "the fixture has only %d threads after the run" % n1)
        opened, live, unsampled = thread_counts(r)
        warn = [l for l in r.err.splitlines() if "cannot be sampled" in l]
        check(len(warn) == 1 and "BPF capture's thread map" in warn[0] and "--capture perf" in warn[0],
              "%d warnings about unsampled threads, or not naming the thread map and the fix" % len(warn), r.err)
        check(live <= 300 and unsampled > 0 and live + unsampled >= n1 - 30,
              "%d threads at the end: %d live, %d unsampled" % (n1, live, unsampled), r.err)
        end = re.search(r"warning: by the end, (\d+) of the VM's threads could not be sampled", r.err)
        check(end and int(end.group(1)) == unsampled, "no end-of-run count of the unsampled threads", r.err)
        check("fake:spin/0" in r.out, "the scheduler was not sampled", r.out + r.err)
        log("--capture bpf, map of 300, %d -> %d threads: %d live, %d unsampled; %s" % (n0, n1, live, unsampled,
                                                                                       warn[0]))
        # now more threads than the map holds: the default is the perf path
        n0 = threads_of(fx.pid)
        # (env -u: the default, whatever capture the sanitizer pass sets)
        r = sample_env(fx.pid, 4096, ["-u", "EXTROSPECT_CAPTURE", small], "-v", "-d", "1")
        check(r.rc == 0, "default capture, %d threads: exit %s" % (n0, r.rc), r.describe())
        check(re.search(r"capture perf \(BPF not used: the VM has \d+ threads, more than BPF capture's thread "
                        r"map holds \(300", r.err), "the default did not fall back to perf, saying why", r.err)
        opened, live, unsampled = thread_counts(r)
        check(unsampled == 0 and live >= n0 - 5 and "cannot be sampled" not in r.err,
              "default capture, %d threads: %d live, %d unsampled" % (n0, live, unsampled), r.err)
        check("fake:spin/0" in r.out, "the scheduler was not sampled", r.out + r.err)
        r = sample_env(fx.pid, 4096, [small], "--capture", "bpf", "-d", "1")
        lines = [l for l in r.err.splitlines() if l.strip() and not re.match(r"(erlang-[a-z-]+: )?note:", l)]
        check(r.rc == 1 and len(lines) == 1 and "--capture perf" in lines[0] and "ulimit -n" in lines[0],
              "--capture bpf with more threads than the map holds: exit %s, %d lines" % (r.rc, len(lines)),
              r.describe())
        log(lines[0])
    finally:
        fx.kill()
        fx.wait()


@timeout(400)
@alone("20,000 threads: most of kernel.pid_max, and their kernel stacks")
def test_20000_threads():
    """A VM that grows from 15,000 threads past 16,384 mid-run (to 20,000),
    under ulimit -n 65536: on the default path none is lost, silently or
    otherwise (BPF's thread map had 16,384 entries: past them threads were
    lost in silence, and at 17,002 threads the tool could not start); then
    at 20,000 threads every one is sampled.  Where the test cannot raise
    the hard fd limit (no CAP_SYS_RESOURCE) it uses the hard limit there
    is, and as many threads as it holds (at least 17,000)."""
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    used = len([d for d in os.listdir("/proc") if d.isdigit()])
    check(pid_max - used > 22000, "kernel.pid_max %d leaves no room for 20,000 more threads" % pid_max)
    nofile = 65536
    if run_cmd(["sh", "-c", "ulimit -n %d" % nofile]).rc != 0:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    # the tool's own fds and the 16 it keeps (sampler.c FD_HEADROOM)
    most = min(20000, nofile - 600)
    check(most >= 17000, "a hard fd limit of %d holds too few threads for this test" % nofile)
    # 15,000, then 1,000 a second: past 16,384 about 1.4 s after the
    # start, well into the run on a loaded machine too
    fx = subprocess.Popen([exe, "many", "15000", "1000", str(most)], stdout=subprocess.PIPE, start_new_session=True)
    try:
        check(fx.stdout.readline().strip() == b"ready", "the fixture did not start")
        n0 = threads_of(fx.pid)
        r = sample_env(fx.pid, nofile, [], "-v", "-d", "2")
        n1 = threads_of(fx.pid)
        check(r.rc == 0, "%d threads growing: exit %s" % (n0, r.rc), r.describe())
        check(n0 < 16384 < n1, "the fixture went from %d to %d threads: not past 16,384 during the run" % (n0, n1))
        opened, live, unsampled = thread_counts(r)
        # those made after the last scan (every 100 ms) while the run ends
        slack = 100 + 1000 * max(0.0, r.elapsed - 2)
        check(unsampled == 0 and "cannot be sampled" not in r.err and opened >= n1 - slack,
              "%d -> %d threads: %d opened, %d unsampled (slack %.0f)" % (n0, n1, opened, unsampled, slack), r.err)
        check("fake:spin/0" in r.out, "the scheduler was not sampled", r.out + r.err)
        capture = re.search(r"capture (\w+)", r.err)
        log("ulimit -n %d, %d -> %d threads: %d opened, %d unsampled, capture %s, %.1f s" % (
            nofile, n0, n1, opened, unsampled, capture and capture.group(1), r.elapsed))
        t0 = time.monotonic()
        while threads_of(fx.pid) < most and time.monotonic() - t0 < 30:
            time.sleep(0.2)
        n = threads_of(fx.pid)
        check(n >= most, "the fixture has only %d threads" % n)
        r = sample_env(fx.pid, nofile, [], "-v", "-d", "1")
        check(r.rc == 0, "%d threads: exit %s" % (n, r.rc), r.describe())
        opened, live, unsampled = thread_counts(r)
        check(unsampled == 0 and live >= n - 5 and "cannot be sampled" not in r.err,
              "%d threads: %d live, %d unsampled" % (n, live, unsampled), r.err)
        check("fake:spin/0" in r.out, "the scheduler was not sampled", r.out + r.err)
        capture = re.search(r"capture (\w+)", r.err)
        log("%d threads: %d live, %d unsampled, capture %s, %.1f s" % (n, live, unsampled,
                                                                   capture and capture.group(1), r.elapsed))
    finally:
        fx.kill()
        fx.wait()


def test_thread_scan_with_every_fd_taken():
    """Under fd limits from comfortable down to the tightest the tool
    starts with, threads the VM makes mid-run are never missed in
    silence: each run that starts ends with one warning naming how many
    threads it could not sample.  At the tight end every fd is taken before
    the first rescan, so listing /proc/PID/task itself needs one (the
    sampler holds one in reserve for it: without, a jobs-3 run of the suite
    saw 0 unsampled and no warning, with 100 threads made)."""
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    fx = subprocess.Popen([exe, "grow", "40"], stdout=subprocess.PIPE, start_new_session=True)
    try:
        check(fx.stdout.readline().strip() == b"ready", "the fixture did not start")
        time.sleep(0.2)
        ran, refused = [], []
        for extra in (40, 24, 10, 0):
            n0 = threads_of(fx.pid)
            r = sample_limited(fx.pid, extra + n0, extra + n0, "-v", "--capture", "perf", "-d", "1.5")
            n1 = threads_of(fx.pid)
            if r.rc != 0:
                # too tight to start: one line, exit 1, and tighter is no better
                lines = [l for l in r.err.splitlines() if l.strip() and not re.match(r"(erlang-[a-z-]+: )?note:", l)]
                check(r.rc == 1 and len(lines) == 1, "limit %d + %d threads: exit %s with %d lines"
                      % (extra, n0, r.rc, len(lines)), r.describe())
                refused.append(extra)
                break
            check(n1 >= n0 + 40, "the fixture made only %d threads during the run" % (n1 - n0))
            warn = [l for l in r.err.splitlines() if "cannot be sampled" in l]
            m = re.search(r"threads: (\d+) opened, (\d+) live, (\d+) slots, (\d+) unsampled", r.err)
            check(m, "no thread counts in -v", r.err)
            opened, unsampled = int(m.group(1)), int(m.group(4))
            # every thread opened or counted, but those made after the last
            # scan (every 100 ms) while the tool ends: at 40 a second, 10
            # and 40 for every second the run took past its sampling
            slack = 10 + 40 * max(0.0, r.elapsed - 1.5)
            check(len(warn) == 1 and opened + unsampled >= n1 - slack,
                  "fd limit of %d + %d threads: %d threads at the end, %d opened + %d unsampled (slack %.0f), "
                  "%d warnings about unsampled threads" % (extra, n0, n1, opened, unsampled, slack, len(warn)),
                  r.err)
            # what it could open it samples, and names: the tool's own fds
            # (the per-CPU readers' epoll, symbol files) are not given to
            # thread events (sampler.c FD_HEADROOM)
            check("fake:spin/0" in r.out, "fd limit of %d + %d threads: the scheduler was not sampled"
                  % (extra, n0), r.out + r.err)
            check("Too many open files" not in r.err, "fd limit of %d + %d threads: the tool ran out of fds "
                  "for its own work" % (extra, n0), r.err)
            ran.append((extra, n1, opened, unsampled))
        check(len(ran) >= 3, "only %d limits let the tool start" % len(ran))
        log("fd limit = threads + N: (N, threads at the end, opened, unsampled) %s; refused at %s" % (ran, refused))
    finally:
        fx.kill()
        fx.wait()


def proc_status(pid):
    """(RSS in KB, open fds) of a running process."""
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def watch_memory(argv, until_s, every_s, timeout=120):
    """Run ARGV (an erlang-sample command line); every EVERY_S seconds until
    it ends or UNTIL_S have passed, (elapsed s, RSS KB, open fds) of it.
    Returns (those, its stderr text, its exit status)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    seen = []
    t0 = time.monotonic()
    while p.poll() is None and time.monotonic() - t0 < until_s:
        time.sleep(every_s)
        try:
            seen.append((time.monotonic() - t0,) + proc_status(p.pid))
        except OSError:
            break
    _, err = p.communicate(timeout=timeout)
    return seen, err.decode(), p.returncode


@timeout(120)
def test_thread_churn():
    """300 threads a second, each living 1-10 ms: slots reused, fds and
    memory flat."""
    exe = build_fixture(os.path.join(tmpdir(), "vm"))
    fx = subprocess.Popen([exe, "churn", "300"], stdout=subprocess.PIPE, start_new_session=True)
    try:
        check(fx.stdout.readline().strip() == b"ready", "the fixture did not start")
        for capture in ("bpf", "perf"):
            p = subprocess.Popen([tool_path(SAMPLE), "-v", "--capture", capture, "-d", "7", str(fx.pid)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            seen = []
            for _ in range(6):
                time.sleep(1)
                try:
                    seen.append(proc_status(p.pid))
                except OSError:
                    break
            out, err = p.communicate(timeout=60)
            err = err.decode()
            if capture == "bpf" and "capture perf" in err:
                continue  # no BPF here: the perf path is tested next
            check(p.returncode == 0, "exit %s" % p.returncode, err)
            m = re.search(r"threads: (\d+) opened, (\d+) live, (\d+) slots, (\d+) unsampled", err)
            check(m, "no thread counts in -v", err)
            opened, slots = int(m.group(1)), int(m.group(3))
            check(opened >= 50 and slots <= 64, "%s: %d threads opened in 7 s but %d slots kept" %
                  (capture, opened, slots), err)
            # every thread it found it could open: none left unsampled for
            # want of a descriptor or a slot (a thread gone before it was
            # found is not one it could sample)
            check(int(m.group(4)) == 0 and "cannot be sampled" not in err,
                  "%s: %s threads unsampled under churn" % (capture, m.group(4)), err)
            fds = [s[1] for s in seen[1:]]
            rss = [s[0] for s in seen[1:]]
            check(fds and max(fds) - min(fds) <= 16, "%s: open fds went %s" % (capture, fds))
            # Under ASan freed memory waits in its quarantine (up to 256 MB)
            # before reuse: RSS grows by design, and the sanitizer pass
            # checks memory safety, not flatness.
            check(sanitized() or (rss and max(rss) <= 1.1 * min(rss) + 1024),
                  "%s: RSS (KB) went %s" % (capture, rss))
            log("%s: %d threads opened, %d slots; fds %d..%d, RSS %d..%d KB" %
                (capture, opened, slots, min(fds), max(fds), min(rss), max(rss)))
    finally:
        fx.kill()
        fx.wait()


@per_vm(only=["otp25-emu-dwarf"])
@timeout(150)
@no_asan("ASan's quarantine grows RSS by design; memory safety is checked elsewhere")
def test_memory_flat_per_sample(target):
    """Nothing grows per sample (once the skid array grew 8 bytes per
    sample, ~0.5 GB/hour on a big VM): 25 s at 4 kHz on the interpreter,
    where every sample reads live and records its skid, perf path; the
    tool's RSS from 5 s on grows by less than 256 KB while at least 40,000
    samples arrive (8 bytes each would be 320 KB; measured: flat to the
    KB); 50 s instead where a loaded machine gives fewer samples."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        vm.eval("xb_deep:start()")
        wait_running(vm, "xb_deep")
        # 25 s; on a loaded machine (the VM gets less CPU, so fewer
        # samples) once more for 50 s
        for secs in (25, 50):
            seen, err, rc = watch_memory([tool_path(SAMPLE), "-v", "-F", "4000", "--capture", "perf",
                                          "--perf-read", "later", "-d",
                                          str(secs), "-t", "5", str(vm.pid)], secs - 1, 1, timeout=60)
            check(rc == 0, "exit %s" % rc, err[-2000:])
            st = re.search(r"received (\d+), processed (\d+)", err)
            check(st, "no -v statistics", err[-2000:])
            after = [s for s in seen if s[0] >= 5]
            # samples in the measured window, in proportion
            n_window = int(st.group(2)) * (after[-1][0] - after[0][0]) / secs if len(after) >= 2 else 0
            if n_window >= 40000:
                break
            log("%d s: only %s samples (%.0f in the measured window): again, longer" % (secs, st.group(2), n_window))
        check(n_window >= 40000, "only %.0f samples in the measured window at 4 kHz (needed 40,000: 8 bytes "
              "each is 320 KB)" % n_window, err[-2000:])
        nl = re.search(r"no live read (\d+)", err)
        check(nl, "no 'no live read' counter in -v", err[-2000:])
        live = int(st.group(2)) - int(nl.group(1))
        check(live >= 0.5 * int(st.group(2)), "only %d of %s samples read live: not what this measures"
              % (live, st.group(2)), err[-2000:])
        check(len(after) >= 10, "only %d measurements" % len(after))
        grew = after[-1][1] - after[0][1]
        check(grew < 256, "RSS grew %d KB from %.0f s to %.0f s (%.0f samples meanwhile): %s"
              % (grew, after[0][0], after[-1][0], n_window, [s[1] for s in after]))
        log("%s samples (%d read live): RSS %d KB at %.0f s, %d KB at %.0f s"
            % (st.group(2), live, after[0][1], after[0][0], after[-1][1], after[-1][0]))


@per_vm(only=["stock"])
@suite("soak")
@timeout(900)
def test_soak_10_minutes(target):
    """10 minutes at 997 Hz: RSS and fds flat within 10 % after warm-up."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        vm.eval("xb_deep:start()")
        wait_running(vm, "xb_deep")
        out = os.path.join(tmpdir(), "soak.folded")
        seen, err, rc = watch_memory([tool_path(SAMPLE), "-v", "-F", "997", "-d", "600", "-o", out, str(vm.pid)],
                                     620, 10)
        check(rc == 0, "exit %s" % rc, err[-2000:])
        after = [s for s in seen if s[0] >= 60 and s[0] <= 590]
        check(len(after) >= 40, "only %d measurements" % len(after))
        rss = [s[1] for s in after]
        fds = [s[2] for s in after]
        mean = sum(rss) / len(rss)
        check(max(rss) <= 1.1 * mean and min(rss) >= 0.9 * mean, "RSS (KB) not flat: %s" % rss)
        check(max(fds) <= 1.1 * min(fds), "open fds not flat: %s" % fds)
        m = re.search(r"received (\d+), processed (\d+)", err)
        log("600 s at 997 Hz: %s samples received, %s processed; RSS %d..%d KB (mean %d), fds %d..%d"
            % (m.group(1) if m else "?", m.group(2) if m else "?", min(rss), max(rss), mean, min(fds), max(fds)))
