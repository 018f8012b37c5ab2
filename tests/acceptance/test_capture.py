"""Right answers on a saturated box: no sample lost to skid,
native work under Erlang never under-counted, on both capture paths.

The saturation tests start CPU hogs outside the VM (2 per core) while the VM
is busy on every scheduler: the sampler then gets the CPU late, which is
exactly when live reads of a process's state come too late.  The broker
tests compare erlang-sample with stock `perf record` on the same VM in the
same run.
"""

import os
import re
import shutil
import subprocess
import time

from xbtest import (alone, asan, bpf_refused, VM, check, log, no_asan, per_vm, run_cmd, run_tool, skip_because,
                    spawn_tool, timeout, tmpdir, tool_path)

from xbsample import Hogs, SplitClock, parse_table, wait_running  # noqa: E402

TOOL = "erlang-sample"
ROW = re.compile(r"^\s*(\d+)\s+(.+?)\s+(\d+\.\d+)%\s+(\[.*\])$")


def stats(err):
    """The -v statistics of a run: received, processed, drop counters, partials."""
    m = re.search(r"received (\d+), processed (\d+); dropped: truncated unwind (\d+), failed "
                  r"validation (\d+), process moved on (\d+), too stale (\d+), no registers "
                  r"(\d+), malformed (\d+);", err)
    check(m, "no statistics line with -v", err)
    v = [int(x) for x in m.groups()]
    st = dict(received=v[0], processed=v[1], dropped=sum(v[2:]))
    check(st["received"] - st["processed"] == st["dropped"],
          "received - processed != the sum of the drop counters", err)
    m = re.search(r"innermost Erlang function only (\d+)", err)
    check(m, "no partial count", err)
    st["partial"] = int(m.group(1))
    m = re.search(r"no live read (\d+); capture (\w+) \(faults \d+\)", err)
    check(m, "no capture statistics", err)
    st["no_live_read"], st["capture"] = int(m.group(1)), m.group(2)
    m = re.search(r"; lost (\d+), throttled (\d+);", err)
    check(m, "no lost/throttled counters", err)
    st["lost"] = int(m.group(1))
    return st


def table(out):
    rows = []
    lines = out.splitlines()
    check(lines and lines[0].startswith("processed "), "not a table", out[:300])
    for l in lines[1:]:
        if l.startswith("skid ") or l.startswith("capture ") or l.startswith("blame "):
            continue
        m = ROW.match(l)
        check(m, "unparseable row %r" % l, out[:2000])
        rows.append((int(m.group(1)), m.group(2), float(m.group(3)), m.group(4)))
    return rows


def sample_v(vm, *args, timeout_s=90):
    r = run_tool(TOOL, "-v", *(list(args) + [str(vm.pid)]), timeout=timeout_s)
    check(r.rc == 0 and not r.timed_out, "erlang-sample %s: exit %s" % (" ".join(args), r.rc),
          r.describe())
    return r, stats(r.err)


def capture_paths():
    """The capture paths to test: perf always; bpf when this kernel takes it."""
    return ["perf", "bpf"]


def bpf_usable(vm):
    """Does --capture bpf work here?  (Tests of the BPF path need it; the
    fallback test checks the other side.)"""
    r = run_tool(TOOL, "-v", "-d", "0.2", "--capture", "bpf", str(vm.pid), timeout=30)
    return r.rc == 0, r.err.strip()[-300:]


def copy_share(stacks):
    """Of the large-term sender's samples (folded stacks, root first: those
    through xb_copy:sink_loop/3, or through the send BIF when the Erlang
    caller could not be read), the share in copy_struct_x + size_object_x;
    where the beam names neither (a stripped OTP 29 exports only its API),
    in native code."""
    mine = [(f, n) for f, n in stacks if "xb_copy:sink_loop/3" in f or
            ("[callers unknown]" in f and "erl_send" in f)]
    total = sum(n for _, n in mine)
    check(total >= 200, "only %d samples of the sender" % total)
    names = {"copy_struct_x", "size_object_x"}
    if any(f[-1] in names for f, _ in stacks):
        return 100.0 * sum(n for f, n in mine if f[-1] in names) / total, "copy_struct_x+size_object_x"
    native = sum(n for f, n in mine if not re.match(r"^[a-z_]+:.+/\d+$", f[-1]))
    return 100.0 * native / total, "native code of the sender (no symbol for copy_struct_x)"


def copy_of_all(stacks):
    """The copying (copy_struct_x + size_object_x leaves) as a share of
    every sample of the windows: a copy sample lost or named as something
    else moves it, where within the sender's own samples (~98 % copying)
    it barely moves."""
    total = sum(n for _, n in stacks)
    names = {"copy_struct_x", "size_object_x"}
    if any(f[-1] in names for f, _ in stacks):
        copying = sum(n for f, n in stacks if f[-1] in names)
    else:  # (as copy_share: the sender's native code where neither is named)
        copying = sum(n for f, n in stacks if ("xb_copy:sink_loop/3" in f or
                                               ("[callers unknown]" in f and "erl_send" in f))
                      and not re.match(r"^[a-z_]+:.+/\d+$", f[-1]))
    return 100.0 * copying / (total or 1)


def other_leaves(stacks):
    """The sender's leaves other than the copying, most samples first (a
    failure's detail: where a share that moved went)."""
    leaves = {}
    for f, n in stacks:
        if "xb_copy:sink_loop/3" in f and f[-1] not in ("copy_struct_x", "size_object_x"):
            leaves[f[-1]] = leaves.get(f[-1], 0) + n
    return ", ".join("%s %d" % kv for kv in sorted(leaves.items(), key=lambda kv: -kv[1])[:8])


def folded(path):
    out = []
    with open(path) as f:
        for line in f:
            frames, n = line.rstrip("\n").rsplit(" ", 1)
            out.append((frames.split(";"), int(n)))
    return out


@alone("its idle windows need the machine without load, its hogs saturate it")
@per_vm()
@timeout(300)
@no_asan("shares measured on a saturated machine: the sanitized tool's own slowness is not what "
         "is measured; its capture paths run sanitized in test_bpf_capture_exact_deep_chain and "
         "test_capture_fallback")
def test_saturated_box(target):
    """Saturated machine (the VM busy on every scheduler, 2 hogs per core
    outside it): >= 99 % of samples processed on each capture path, none
    needing a live read, the 75/25 split within +-3 points (of the split
    xb_split's own CPU clock over the same windows: SplitClock), and the
    large-term sender's copying share within 2 points of the same VM's
    share without the hogs, both within the sender's samples (the
    first measure, ~98 %) and of all samples (~48 %, which a lost copy sample
    moves: measured 47.9-49.6 % busy against 48.3-49.5 % idle, stock,
    the interpreter, OTP 29 and its stripped copy).  The sender's mix itself wanders from one
    window to the next (with the sink's queue in the thousands, +-4 points
    on a CI machine: xb_copy.erl keeps it short now), so after a warm-up
    idle and busy windows alternate, three of each, and their samples are
    pooled: a slow drift falls on both.  Measured again once when more
    than 2 points apart."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        vm.eval("xb_copy:start_sink(1000)")
        wait_running(vm, "xb_split")
        wait_running(vm, "xb_sender")
        ok_bpf, why = bpf_usable(vm)
        paths = ["perf"] + (["bpf"] if ok_bpf else [])
        d = tmpdir()
        # -F 1997: twice the default rate, so that sampling noise stays
        # well inside the bounds (about 1,000 samples in hot_a/hot_b per
        # busy window at 997 Hz under the hogs).
        # The VM on one CPU: the sender and its sink never run in
        # parallel, idle or not.  (Running in parallel, on an idle
        # machine, they contend for the sink's queue: the sender's mix
        # moves by 3-5 points between parallel and interleaved, which is
        # the workload, not the tool.)  The hogs still saturate every CPU.
        if (os.cpu_count() or 1) > 1:
            subprocess.run(["taskset", "-a", "-p", "-c", "0", str(vm.pid)], stdout=subprocess.DEVNULL, check=True)
        # Warm-up: the sink's queue and the allocators' carriers settle in
        # the first seconds (the sender's mix moves most then).
        sample_v(vm, "-d", "2", "-F", "1997", "-t", "5")

        def windows(cap, tag):
            """Three idle and three busy windows, alternating: pooled
            stacks and -v counters of the busy ones, hot_a/hot_b counts."""
            idle, busy = [], []
            tot = dict(received=0, processed=0, lost=0, partial=0, no_live_read=0)
            a = b = 0
            # The split's truth over the same windows: the CPU time the
            # scheduler thread spent in each function (xb_split's CPU
            # clock; its wall-time sums count an OS preemption as time in
            # the function preempted, and wander by 3-8 points under the
            # hogs, or under any load, as in tests/soak-saturated.sh).
            clock = SplitClock(vm, nominal=75, cpu=target)
            for k in range(3):
                f = os.path.join(d, "idle-%s-%s%d.folded" % (cap, tag, k))
                sample_v(vm, "-d", "2", "-F", "1997", "-t", "500", "--capture", cap, "-o", f)
                idle += folded(f)
                with Hogs():
                    f = os.path.join(d, "busy-%s-%s%d.folded" % (cap, tag, k))
                    t = os.path.join(d, "busy-%s-%s%d.table" % (cap, tag, k))
                    r, st = sample_v(vm, "-d", "3", "-F", "1997", "-t", "500", "--capture", cap,
                                     "--skid-summary", "-o", t, "-o", f)
                check(st["capture"] == cap, "capture %s in use, asked for %s" % (st["capture"], cap), r.err)
                busy += folded(f)
                for key in tot:
                    tot[key] += st[key]
                rows = table(open(t).read())
                a += sum(n for n, name, _, _ in rows if name == "xb_split:hot_a/1")
                b += sum(n for n, name, _, _ in rows if name == "xb_split:hot_b/1")
            return idle, busy, tot, a, b, clock.share()

        for cap in paths:
            idle, busy, tot, a, b, truth = windows(cap, "")
            rec, proc = tot["received"], tot["processed"]
            check(rec >= 1500, "%s: only %d samples under saturation" % (cap, rec))
            check(proc >= 0.99 * rec, "%s: processed %d of %d (< 99 %%) on a saturated machine" % (cap, proc, rec))
            # Samples the kernel could not deliver are not in `received`:
            # they must not be where the 1 % went instead.
            check(tot["lost"] <= 0.005 * (rec + tot["lost"]),
                  "%s: the kernel lost %d samples (%d delivered) on a saturated machine" % (cap, tot["lost"], rec))
            # Both paths read each sample's process at its moment (the
            # perf path: a reader on the sampled CPU, which a saturated
            # machine does not delay, being real-time).
            # (the promise: >= 99 % with BPF capture; every sample in every
            # run so far, saturated and matrix alike)
            check(tot["no_live_read"] >= (0.99 if cap == "bpf" else 0.98) * proc and tot["partial"] <= 0.02 * proc,
                  "%s: %d of %d samples needed a live read, %d have their callers unknown, on a saturated "
                  "machine" % (cap, proc - tot["no_live_read"], proc, tot["partial"]))
            check(a + b >= 600, "%s: only %d samples in hot_a/hot_b" % (cap, a + b))
            share = 100.0 * a / (a + b)
            check(abs(share - truth) <= 3, "%s: hot_a share %.1f %% under saturation (%.1f +- 3 by xb_split's "
                  "own CPU clock, nominal 75)" % (cap, share, truth))
            cs_idle, what = copy_share(idle)
            cs_busy, _ = copy_share(busy)
            log("%s saturated: processed %d/%d, hot_a %.1f %% (its clock %.1f %%), %s %.1f %% (idle %.1f %%), "
                "partial %d, no live read %d; copying of all samples %.1f %% (idle %.1f %%)" % (
                    cap, proc, rec, share, truth, what, cs_busy, cs_idle, tot["partial"], tot["no_live_read"],
                    copy_of_all(busy), copy_of_all(idle)))
            idle2, busy2 = idle, busy
            ca_idle, ca_busy = copy_of_all(idle), copy_of_all(busy)
            if abs(cs_busy - cs_idle) > 2 or abs(ca_busy - ca_idle) > 2:
                # The mix still wanders now and then (CI saw a 2.1-point
                # gap once): measured again, once; a tool that under-counts
                # copying under load does so both times (once by 5x).
                idle2, busy2, _, _, _, _ = windows(cap, "again")
                cs_idle, _ = copy_share(idle2)
                cs_busy, _ = copy_share(busy2)
                ca_idle, ca_busy = copy_of_all(idle2), copy_of_all(busy2)
                log("%s again: %s %.1f %% (idle %.1f %%); of all samples %.1f %% (idle %.1f %%)"
                    % (cap, what, cs_busy, cs_idle, ca_busy, ca_idle))
            check(abs(cs_busy - cs_idle) <= 2, "%s: %s %.1f %% under saturation, %.1f %% without (more than 2 "
                  "points apart; three windows of each, pooled, twice)" % (cap, what, cs_busy, cs_idle),
                  "the sender's other leaves, idle: %s\nbusy: %s" % (other_leaves(idle2), other_leaves(busy2)))
            # ... and as a share of every sample (~48 %): within the
            # sender's own samples copying is ~98 %, so a copy sample lost
            # with its sender frame, or named as something else, barely
            # moves that share; here a fifth of them lost is 10 points
            check(abs(ca_busy - ca_idle) <= 2, "%s: %s %.1f %% of all samples under saturation, %.1f %% without"
                  % (cap, what, ca_busy, ca_idle))
    if not ok_bpf:
        skip_because("no-bpf", target, why)


def deep_chain(frames):
    """frames (root first) hold a->b->c->d->leaf, ending there; or, for a
    sample in the JIT's yield test on the way into leaf/1 (the fragment is
    jumped to: no return address names leaf/1, and leaf/1 has no frame of
    its own), a->b->c->d and then that fragment."""
    want = ["xb_deep:a/1", "xb_deep:b/1", "xb_deep:c/1", "xb_deep:d/1", "xb_deep:leaf/1"]
    for i in range(len(frames) - len(want) + 1):
        if frames[i:i + len(want)] == want:
            return True
    n = len(want) - 1
    for i in range(len(frames) - n):
        if frames[i:i + n] == want[:n] and frames[i + n] == "global::i_test_yield_shared":
            return True
    return False


def thread_policies(pid):
    """{tid: (scheduling policy, nice)} of a process's threads (/proc stat
    fields 41 and 19; 0 SCHED_OTHER, 1 SCHED_FIFO)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(rest[38]), int(rest[16]))
    return out


def policies_while_running(p, seconds=1.5):
    """{tid: {(policy, nice), ...}} of P's threads, polled every 50 ms for
    SECONDS or until it ends; only once P runs our tool (a wrapper that
    execs it, setpriv, is not counted)."""
    pol = {}
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end and p.poll() is None:
        try:
            with open("/proc/%d/comm" % p.pid) as f:
                ours = f.read().strip() == TOOL[:15]
            now = thread_policies(p.pid) if ours else {}
        except OSError:  # it ended meanwhile
            break
        for tid, v in now.items():
            pol.setdefault(tid, set()).add(v)
        time.sleep(0.05)
    return pol


@per_vm(only=["stock"])
def test_drain_priority_and_no_realtime(target):
    """README: the drain loop takes SCHED_FIFO 1 where allowed (bursts of
    at most 2 ms, then nice -10) and the perf path reads each sample at
    its moment; --no-realtime declines both: the tool's threads stay
    SCHED_OTHER at the nice they started with, the stacks are read live
    on a timer, and -v
    says so.  Without CAP_SYS_NICE (and RLIMIT_RTPRIO, RLIMIT_NICE 0) the
    same as --no-realtime, and -v says the drain loop is normal."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        seen = {}
        for tag, extra in (("default", []), ("no-realtime", ["--no-realtime"])):
            p = spawn_tool(TOOL, "-v", "-d", "2", "--capture", "perf", *(extra + [str(vm.pid)]))
            pol = policies_while_running(p)
            out, err = p.communicate(timeout=60)
            err = err.decode(errors="replace")
            check(p.returncode == 0, "erlang-sample %s: exit %s" % (tag, p.returncode), err)
            seen[tag] = (pol, err)
        pol, err = seen["default"]
        check("drain loop SCHED_FIFO 1 (bursts of 2 ms, then nice -10)" in err,
              "-v does not say the drain loop runs at SCHED_FIFO 1", err)
        check("reads at the moment of the sample" in err, "the perf path does not read at the sample", err)
        check(any(1 in {v[0] for v in vs} for vs in pol.values()),
              "no thread of the tool ever at SCHED_FIFO: %r" % pol)
        pol, err = seen["no-realtime"]
        check("drain loop normal (--no-realtime)" in err and "stacks read live on a timer (--no-realtime)" in err,
              "-v does not say --no-realtime declined SCHED_FIFO and the reads at the sample", err)
        mine = os.getpriority(os.PRIO_PROCESS, 0)  # what the tool inherits
        check(pol and all(vs == {(0, mine)} for vs in pol.values()),
              "--no-realtime: the tool's threads at (policy, nice) %r, not SCHED_OTHER at nice %d (as "
              "started)" % (pol, mine))
        log("default: policies %s; --no-realtime: %s" % (
            sorted({v for vs in seen["default"][0].values() for v in vs}),
            sorted({v for vs in seen["no-realtime"][0].values() for v in vs})))
        # Where SCHED_FIFO is not allowed (no CAP_SYS_NICE, RLIMIT_RTPRIO
        # 0) and nice -10 neither (RLIMIT_NICE 0): the drain loop as it
        # was started, no thread ever real-time, the stacks read live on a
        # timer, and -v says so.  (nice -10 without SCHED_FIFO needs an
        # RLIMIT_NICE of 30, and raising it CAP_SYS_RESOURCE, which root
        # here lacks: that step is not tested.)
        setpriv = shutil.which("setpriv")
        check(setpriv, "setpriv (util-linux) is not installed")
        errf = os.path.join(tmpdir(), "no-sys-nice.err")
        with open(errf, "w") as fe:
            # setpriv execs: p.pid is the tool's
            p = subprocess.Popen([setpriv, "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--",
                                  tool_path(TOOL), "-v", "-d", "2", "--capture", "perf", str(vm.pid)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=fe, start_new_session=True)
        try:
            pol = policies_while_running(p)
            out, _ = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = open(errf).read()
        check(p.returncode == 0, "erlang-sample without CAP_SYS_NICE: exit %s" % p.returncode, err)
        check("drain loop normal," in err and "stacks read live on a timer" in err,
              "-v does not say the drain loop runs as started and reads live on a timer", err)
        vals = {v for vs in pol.values() for v in vs}
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        check(pol and vals == {(0, mine)}, "without CAP_SYS_NICE: the tool's threads at (policy, nice) %r, not "
              "SCHED_OTHER at nice %d (as started)" % (pol, mine))
        check(re.search(r"^\s*\d+\s+xb_split:hot_a/1\s", out.decode(errors="replace"), re.M),
              "without CAP_SYS_NICE: no xb_split:hot_a/1 row", out.decode(errors="replace")[:1500])
        log("without CAP_SYS_NICE: policies %s" % sorted(vals))


def bpf_folded(vm, target, start, name, *args):
    """Start a workload (START, evaluated; NAME, the process to see
    running), skip where this kernel refuses BPF, and sample it with BPF
    capture as folded stacks: (result, -v statistics, folded file)."""
    vm.eval(start)
    wait_running(vm, name)
    ok, why = bpf_usable(vm)
    if not ok:
        skip_because("no-bpf", target, why)
    out = os.path.join(tmpdir(), "%s.folded" % name)
    r, st = sample_v(vm, *(list(args) + ["--capture", "bpf", "--format", "folded", "-o", out]))
    check(st["capture"] == "bpf", "capture %s in use" % st["capture"], r.err)
    return r, st, out


@per_vm(only=["stock", "otp25-emu-dwarf"])
def test_bpf_capture_tall_stack(target):
    """The BPF capture's Erlang stack copy is bounded (README: 16 KiB from
    2 KiB below E; deeper stacks have their outer frames read live,
    counted): a process 800 frames deep, four words a frame (25 KiB of
    stack), is sampled with all 800 frames, and those samples are not
    counted as needing no live read."""
    with VM(target, schedulers=2) as vm:
        # --max-skid-ms 1000: the outer frames' live read may come late on
        # a loaded machine, and xb_tall's stack never changes (the bound
        # on skid is test_max_skid_ms's)
        r, st, out = bpf_folded(vm, target, "xb_deep:tall(800)", "xb_tall", "-d", "4",
                                "--max-callchain-depth", "1024", "--max-skid-ms", "1000")
        mine = [(frames, n) for frames, n in folded(out) if "xb_deep:tall/3" in frames]
        total = sum(n for _, n in mine)
        check(total >= 150, "only %d samples of xb_tall" % total, r.err)

        def whole_stack(frames):
            return (frames.count("xb_deep:tall/3") == 800 and
                    frames[len(frames) - frames[::-1].index("xb_deep:tall/3"):][:1] == ["xb_deep:leaf/1"])
        whole = sum(n for frames, n in mine if whole_stack(frames))
        bad = [(n, [f for f in frames if f != "xb_deep:tall/3"], frames.count("xb_deep:tall/3"))
               for frames, n in mine if not whole_stack(frames)]
        check(whole >= 0.99 * total, "%d of %d samples of xb_tall show its 800 frames; not (samples, other "
              "frames, tall/3 frames): %s" % (whole, total, bad[:4]), r.err)
        live = st["processed"] - st["no_live_read"]
        check(live >= 0.9 * total, "%d samples read something live, %d of xb_tall's needed its outer "
              "frames read live" % (live, total), r.err)
        log("xb_tall, 800 frames of 4 words: %d of %d samples whole; %d of %d processed read live"
            % (whole, total, live, st["processed"]))


@per_vm()
def test_bpf_capture_exact_deep_chain(target):
    """BPF capture: >= 99 % of samples need no live read, and every stack of
    the deep chain (a->b->c->d->leaf) is complete and exact."""
    with VM(target, schedulers=2) as vm:
        r, st, out = bpf_folded(vm, target, "xb_deep:start()", "xb_deep", "-d", "3")
        check(st["processed"] >= 0.99 * st["received"], "processed %d of %d"
              % (st["processed"], st["received"]), r.err)
        check(st["no_live_read"] >= 0.99 * st["processed"],
              "only %d of %d samples needed no live read" % (st["no_live_read"], st["processed"]),
              r.err)
        with open(out) as f:
            lines = [l.rstrip("\n") for l in f if l.strip()]
        mine = total = 0
        for l in lines:
            frames, n = l.rsplit(" ", 1)
            frames = frames.split(";")
            if "xb_deep:leaf/1" not in frames and not any(f.startswith("xb_deep:") for f in frames):
                continue
            total += int(n)
            check(deep_chain(frames) and "[callers unknown]" not in frames,
                  "a stack of xb_deep is not the whole chain: %s" % ";".join(frames))
            mine += int(n)
        check(total >= 500, "only %d samples of xb_deep" % total, "\n".join(lines[:20]))
        log("bpf: %d/%d processed, %d needed no live read; %d stacks of xb_deep, all whole"
            % (st["processed"], st["received"], st["no_live_read"], mine))


@per_vm(only=["stock", "otp25-emu-dwarf"])
def test_blame_on_a_broker_accounts_for_every_match(target):
    """--blame on the broker, each capture path: the rows add up to every
    matching sample (those whose Erlang caller cannot be named get a row
    of their own, e.g. "[no Erlang code above]": a GC the scheduler runs
    for a process it is about to run), and few need it: one run saw 706
    of 817 erts_garbage_collect samples with no Erlang code above on the
    perf path, a seventh of the data described by the percentages."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_broker:start()")
        wait_running(vm, "xb_queue_1")
        refused = bpf_refused()
        for cap in ["perf"] + ([] if refused else ["bpf"]):
            for fn in ("erts_garbage_collect", "copy_struct"):
                r = run_tool(TOOL, "-d", "3", "-t", "100000", "--blame", fn, "--capture", cap, str(vm.pid),
                             timeout=60)
                check(r.rc == 0, "--blame %s --capture %s: exit %s" % (fn, cap, r.rc), r.describe())
                t = parse_table(r.out)
                matched, no_erlang = t.blame
                check(matched >= 100, "%s --blame %s: only %d matching samples" % (cap, fn, matched), r.out)
                check(sum(n for n, _, _, _ in t.rows) == matched,
                      "%s --blame %s: the rows add up to %d, not the %d matching samples"
                      % (cap, fn, sum(n for n, _, _, _ in t.rows), matched), r.out)
                marks = sum(n for n, name, _, tag in t.rows if tag == "[-]")
                check(marks == no_erlang, "%s --blame %s: %d samples in mark rows, the header says %d with no "
                      "Erlang code above" % (cap, fn, marks, no_erlang), r.out)
                check(no_erlang <= 0.10 * matched, "%s --blame %s: %d of %d matching samples have no Erlang "
                      "caller" % (cap, fn, no_erlang, matched), r.out)
                top = [name for _, name, _, _ in t.rows[:3]]
                check(any(n.startswith(("xb_broker:", "gen_server:", "gen:")) for n in top),
                      "%s --blame %s: the broker's code is not among the first rows %r" % (cap, fn, top), r.out)
                log("%s --blame %s: %d matches, %d with no Erlang code above; first %s"
                    % (cap, fn, matched, no_erlang, top[0]))
        if refused:
            skip_because("no-bpf", target, refused)


@alone("saturates the machine with its own hogs")
@per_vm()
def test_perf_reads_at_the_sample_exact_deep_chain(target):
    """The perf path reads each sample's process and Erlang stack at the
    moment of the sample (a SCHED_FIFO reader on the sampled CPU, which
    runs before the sampled thread does again): on a saturated machine,
    >= 99 % of samples need no live read and every stack of the deep chain
    is whole; read later instead (--perf-read later), the same run loses
    callers (the test would pass without the readers otherwise)."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_deep:start()")
        vm.eval("xb_broker:start(2, 4, 2)")
        wait_running(vm, "xb_deep")
        wait_running(vm, "xb_queue_1")
        d = tmpdir()
        res = {}
        with Hogs():
            for how in ("sample", "later"):
                out = os.path.join(d, "deep-%s.folded" % how)
                r, st = sample_v(vm, "-d", "3", "--capture", "perf", "--perf-read", how, "--format", "folded",
                                 "-o", out)
                check(st["capture"] == "perf", "capture %s in use" % st["capture"], r.err)
                check(st["processed"] >= 0.99 * st["received"] and st["received"] >= 300,
                      "processed %d of %d" % (st["processed"], st["received"]), r.err)
                stacks = folded(out)
                deep = [(f, n) for f, n in stacks if any(x.startswith("xb_deep:") for x in f)]
                whole = sum(n for f, n in deep if deep_chain(f) and "[callers unknown]" not in f)
                ndeep = sum(n for _, n in deep)
                check(ndeep >= 200, "%s: only %d samples of xb_deep" % (how, ndeep))
                res[how] = (st, whole, ndeep, r.err)
        st, whole, ndeep, err = res["sample"]
        check("reads at the moment of the sample: " in err, "-v does not say the perf path read at the "
              "moment of the sample", err)
        check(st["no_live_read"] >= 0.99 * st["processed"],
              "at the sample: only %d of %d samples needed no live read" % (st["no_live_read"], st["processed"]))
        check(whole == ndeep, "at the sample: %d of %d stacks of xb_deep are not the whole chain"
              % (ndeep - whole, ndeep))
        check(st["partial"] <= 0.02 * st["processed"], "at the sample: %d of %d samples have their callers "
              "unknown" % (st["partial"], st["processed"]))
        lst = res["later"][0]
        check(lst["partial"] > 3 * max(st["partial"], 10),
              "read later, %d samples had their callers unknown, at the sample %d: the broker's samples "
              "should tell the two apart" % (lst["partial"], st["partial"]))
        log("saturated: at the sample %d/%d processed, %d needed no live read, %d callers unknown, "
            "xb_deep %d/%d whole; read later: %d callers unknown, xb_deep %d/%d whole"
            % (st["processed"], st["received"], st["no_live_read"], st["partial"], whole, ndeep,
               lst["partial"], res["later"][1], res["later"][2]))


@alone("counts what the kernel loses on a machine it saturates itself")
@per_vm(only=["stock"])
@no_asan("counts samples the kernel lost on a saturated machine: timing, not memory safety")
def test_nothing_lost_at_start(target):
    """Short runs on a saturated machine lose no samples: the events are
    enabled only when the drain loop starts.  (They used to be enabled at
    open, and setting up afterwards outlasted a scheduler's ring: the kernel
    lost 150-230 samples at every start, a fifth of a 1 s run, while the
    table said 'processed 100 %'.)  At 4 kHz a scheduler's ring holds ~8 ms
    of its samples, so a setup after the open that outlasts that shows here
    whatever the load (setup takes 0.3-1 s on a saturated machine: -vv)."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_broker:start()")
        wait_running(vm, "xb_queue_1")
        ok_bpf, _ = bpf_usable(vm)
        with Hogs():
            rec = lost = 0
            for cap in ["perf"] + (["bpf"] if ok_bpf else []):
                for _ in range(3):
                    r, st = sample_v(vm, "-d", "1", "-F", "3997", "--capture", cap)
                    rec += st["received"]
                    lost += st["lost"]
                    log("%s -d 1: %d delivered, %d lost" % (cap, st["received"], st["lost"]))
                    check("warning: the kernel lost" not in r.err or st["lost"],
                          "a lost-samples warning without lost samples", r.err)
                    check("sampling starts" not in r.err, "-v says how long the setup took (-vv's)", r.err)
            # -vv says how long the setup after the open took (README)
            r = run_tool(TOOL, "-vv", "-d", "1", str(vm.pid), timeout=60)
            m = re.search(r"^(?:erlang-sample: )?(?:debug: )?sampling starts (\d+\.\d) ms after the events were "
                          r"opened$", r.err, re.M)
            check(r.rc == 0 and m and 0 < float(m.group(1)) < 30000,
                  "-vv does not say how long the setup after the events' open took", r.err[-3000:])
            log("-vv: %s" % m.group(0))
        check(rec >= 300, "only %d samples in the short runs" % rec)
        check(lost <= 0.005 * (rec + lost),
              "the kernel lost %d samples (%d delivered) in short runs on a saturated machine"
              % (lost, rec))
        log("short runs under the hogs: %d delivered, %d lost" % (rec, lost))
        if not ok_bpf:
            skip_because("no-bpf", target)


@per_vm(only=["stock"])
@asan("the capture fallback without CAP_BPF")
def test_capture_fallback(target):
    """The default (auto) takes BPF where it loads; --capture perf, and BPF
    refused (no CAP_BPF): the perf path works as before and one -v line
    says BPF was not used and why."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        # auto, where BPF loads (as root here; CI's kernel takes it), is
        # BPF: a fallback to perf there would pass every other test.  (Asked
        # for by name: the sanitizer pass sets EXTROSPECT_CAPTURE=perf for
        # runs that name no path.)
        refused = bpf_refused()
        r, st = sample_v(vm, "-d", "1", "--capture", "auto")
        check(st["capture"] == ("perf" if refused else "bpf"), "auto took %s (BPF %s)"
              % (st["capture"], "refused: %s" % refused if refused else "loads here"), r.err)
        r, st = sample_v(vm, "-d", "1", "--capture", "perf")
        check(st["capture"] == "perf", "capture %s with --capture perf" % st["capture"], r.err)
        check(re.search(r"capture perf \(--capture perf; reads at the moment of the sample: \d+ SCHED_FIFO "
                        r"readers, one per CPU\)", r.err) and "BPF not used" not in r.err,
              "-v does not say why, or how the perf path reads", r.err)
        # Without CAP_BPF (CAP_PERFMON and CAP_SYS_PTRACE kept: sampling and
        # reading work), auto falls back to perf and says why.
        if not shutil.which("setpriv"):
            raise AssertionError("setpriv (util-linux) is missing")
        tool = os.path.realpath(os.path.join(os.environ.get("XB_BUILD_DIR", "build"), TOOL))
        # the scheduler thread's CPU time, what an on-CPU sampler
        # measures (wall time counts preemption: the sanitizer pass beside
        # another test once saw its clock at 70.9 % and the samples at
        # 76.4 %, 5.5 points apart)
        clock = SplitClock(vm, nominal=75, cpu=target)
        r = run_cmd(["setpriv", "--inh-caps=-all,+perfmon,+sys_ptrace",
                     "--ambient-caps=-all,+perfmon,+sys_ptrace", "--bounding-set=-all,+perfmon,+sys_ptrace",
                     "--", tool, "-v", "-d", "3", "-t", "100", "--capture", "auto", str(vm.pid)], timeout=30)
        check(r.rc == 0, "erlang-sample without CAP_BPF failed", r.describe())
        truth = clock.share()
        st = stats(r.err)
        check(st["capture"] == "perf", "capture %s without CAP_BPF" % st["capture"], r.err)
        lines = [l for l in r.err.splitlines() if "BPF not used" in l]
        check(len(lines) == 1 and "CAP_BPF" in lines[0] and "capture perf (BPF not used: " in lines[0],
              "no one line saying why BPF was not used", r.err)
        check(st["processed"] >= 0.95 * st["received"], "processed %d of %d"
              % (st["processed"], st["received"]), r.err)
        # as before: the split's 75/25 (+-5 of its own clock, as test_known_split)
        processed, _, rows = parse_table(r.out)
        counts = {name: n for n, name, _, tag in rows if tag == "[Erlang]"}
        a, b = counts.get("xb_split:hot_a/1", 0), counts.get("xb_split:hot_b/1", 0)
        check(a + b >= 500 and a + b > 0.5 * processed, "without CAP_BPF: hot_a/hot_b %d of %d samples"
              % (a + b, processed), r.out)
        check(abs(100.0 * a / (a + b) - truth) <= 5, "without CAP_BPF: hot_a/1 %.1f %% (%.1f +- 5 by "
              "xb_split's own clock)" % (100.0 * a / (a + b), truth), r.out)
        log("without CAP_BPF: hot_a/1 %.1f %% of %d" % (100.0 * a / (a + b), a + b))
        log(lines[0][:200])
        if refused:
            skip_because("no-bpf", target, refused)


# --------------------------------------------------------------------------
# A message broker under load, next to stock perf

def perf_leaf_shares(perf, data, pid, jit):
    """perf's leaf symbols: {category: share %} over all its samples."""
    r = run_cmd([perf, "script", "-i", data, "-F", "ip,sym,dso"], timeout=120)
    check(r.rc == 0, "perf script failed", r.describe())
    n = cs = so = erl = 0
    for l in r.out.splitlines():
        l = l.strip()
        if not l:
            continue
        n += 1
        if re.search(r"\scopy_struct_x\s", l + " "):
            cs += 1
        elif re.search(r"\ssize_object_x\s", l + " "):
            so += 1
        elif jit and ("perf-%d.map" % pid in l or "[JIT]" in l):
            erl += 1
        elif not jit and re.search(r"\sprocess_main\s", l + " "):
            erl += 1
    check(n >= 1000, "perf recorded only %d samples" % n)
    return n, {"copy_struct_x": 100.0 * cs / n, "size_object_x": 100.0 * so / n,
               "Erlang code": 100.0 * erl / n}


def our_leaf_shares(rows, processed):
    cs = sum(c for c, name, _, _ in rows if name == "copy_struct_x")
    so = sum(c for c, name, _, _ in rows if name == "size_object_x")
    erl = sum(c for c, _, _, tag in rows if tag in ("[Erlang]", "[JIT]"))
    return {"copy_struct_x": 100.0 * cs / processed, "size_object_x": 100.0 * so / processed,
            "Erlang code": 100.0 * erl / processed}


@per_vm(only=["stock", "otp25-emu-dwarf"])
@timeout(240)
@no_asan("shares compared with perf record in one run: timing, not memory safety, is measured")
def test_broker_next_to_perf(target):
    """The broker workload (gen_server calls and casts of mid-sized terms):
    >= 98 % processed, callers unknown <= 2 % with BPF capture (<= 15 % on
    the perf path), and the shares of copy_struct_x, size_object_x and
    Erlang code within 1.5 points of perf record on the same VM in the same
    run (+JPperf map names the JIT's code for perf)."""
    perf = shutil.which("perf")
    check(perf, "perf (linux-perf) is not installed; tests/run-all.sh installs it")
    extra = ["+JPperf", "map"] if target.jit else []
    with VM(target, extra, schedulers=2) as vm:
        try:
            vm.eval("xb_broker:start()")
            wait_running(vm, "xb_queue_1")
            ok_bpf, why = bpf_usable(vm)
            paths = (["bpf"] if ok_bpf else []) + ["perf"]
            for cap in paths:
                data = os.path.join(tmpdir(), "perf-%s.data" % cap)
                # 12 s at 1999 Hz: about 12,000 samples each on a
                # saturated machine (tests/soak-saturated.sh), where 8 s at
                # 997 Hz gave about 4,200, and a 22 % share then differs
                # between two independent samplers by 0.6 points (sd):
                # 1.5 points was 2.5 sd, now over 4.
                pp = subprocess.Popen([perf, "record", "-q", "-e", "cpu-clock:u", "-F", "1999", "-p",
                                       str(vm.pid), "-o", data, "--", "sleep", "12"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                r, st = sample_v(vm, "-d", "12", "-F", "1999", "-t", "100000", "--capture", cap)
                _, perr = pp.communicate(timeout=60)
                check(pp.returncode == 0, "perf record failed: %s" % perr.decode()[-300:])
                check(st["capture"] == cap, "capture %s in use" % st["capture"], r.err)
                rec, proc = st["received"], st["processed"]
                check(proc >= 0.98 * rec, "%s: processed %d of %d (< 98 %%)" % (cap, proc, rec), r.err)
                unknown = 100.0 * st["partial"] / max(proc, 1)
                # BPF capture: <= 2 % callers unknown; the perf path <= 15 %:
                # it reads each process at the moment of its sample, on the
                # sampled CPU (a broker's processes run for microseconds at
                # a time: read milliseconds later, with --perf-read later,
                # 20-60 % of the samples find their process moved on).
                limit = 2.0 if cap == "bpf" else 15.0
                check(unknown <= limit, "%s: %.1f %% of the samples have their callers unknown "
                      "(limit %.0f %%)" % (cap, unknown, limit), r.err)
                if cap == "perf":
                    check("reads at the moment of the sample" in r.err,
                          "the perf path did not read at the moment of the sample", r.err)
                ours = our_leaf_shares(table(r.out), proc)
                n, theirs = perf_leaf_shares(perf, data, vm.pid, target.jit)
                # The broker copies enough for 1.5 points to tell an
                # under-count (a broker once gave copy_struct_x 0.32 % against
                # perf's 1.64 %, inside 1.5 points): perf sees 13-15 % and
                # 9-10 % here; a workload that copied less would make the
                # comparison weak, so it fails instead.
                check(theirs["copy_struct_x"] >= 5 and theirs["size_object_x"] >= 3,
                      "perf record: copy_struct_x %.2f %%, size_object_x %.2f %%: the broker no longer "
                      "copies enough for the comparison to mean anything" % (theirs["copy_struct_x"],
                                                                            theirs["size_object_x"]))
                for k in ("copy_struct_x", "size_object_x", "Erlang code"):
                    check(abs(ours[k] - theirs[k]) <= 1.5,
                          "%s: %s %.2f %% in erlang-sample, %.2f %% in perf record (more than 1.5 "
                          "points apart)" % (cap, k, ours[k], theirs[k]), r.out[:3000])
                log("%s: processed %d/%d, callers unknown %.1f %%; %s" % (
                    cap, proc, rec, unknown, ", ".join("%s %.2f/%.2f" % (k, ours[k], theirs[k])
                                                       for k in ours)))
        finally:
            try:
                os.unlink("/tmp/perf-%d.map" % vm.pid)
            except OSError:
                pass
        if not ok_bpf:
            skip_because("no-bpf", target, why)
