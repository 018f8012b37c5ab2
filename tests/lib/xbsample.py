"""xbsample - helpers for tests that run erlang-sample (parsing its outputs,
judging the frames it names).  Used by tests/acceptance/test_sample.py and
test_promises.py; other test files may use them too.

Every parser here fails (AssertionError) on text it does not understand and
on outputs with no evidence in them, so that a test built on it cannot pass
with nothing:

    parse_table(text)     the default table and --blame: every line must be
                          the 'processed' line, a row, or a known note line;
                          rows need processed > 0 (allow_no_rows=True to
                          accept none); each row's percentage must be its
                          count over the denominator; rows most samples first.
    parse_folded(text)    'root;...;leaf COUNT' lines, at least one.
    check_no_garbage(vm, names, what, expect=..., counts=...)
                          every Erlang frame names a loaded function, there is
                          at least one, and (expect=) it is one the workload
                          can be running: a sample pinned on a neighbour names
                          a loaded function too, but one that is not running.
    check_frame_addresses(vm, frames, truth)
                          each (address, name) printed by --pstack lies inside
                          that function's code according to the VM itself.
    SplitClock(vm)        xb_split's own clock: the hot_a/1 share of the time
                          it spent in hot_a/1 + hot_b/1 since SplitClock was
                          made (.share()): the truth a sampled split is held
                          to, measured, not assumed (a unit of work need not
                          cost the same in both on every CPU).
"""

import os
import re
import shutil
import subprocess
import time

import xbtest
from xbtest import WORKLOADS, check, log, run_cmd, run_tool, time_scale, wait_for

TOOL = "erlang-sample"
ROW = re.compile(r"^\s*(\d+)\s+(.+?)\s+(\d+\.\d+)%\s+(\[[^\]]*\])$")
PROCESSED = re.compile(r"^processed (\d+)/(\d+) samples \((\d+\.\d)%\)$")
BLAME = re.compile(r"^blame (.+): (\d+) samples have it on their (?:native )?stack "
                   r"\((\d+) with no Erlang code above it\)$")
SKID = re.compile(r"^skid \(sample -> VM memory read, us\): ")
# --skid-summary's second line (the capture path's share of samples that
# needed no live read).
CAPTURE = re.compile(r"^capture (\S+): (\d+) of (\d+) processed samples needed no live read; "
                     r"(\d+) read live later than [0-9.]+ ms kept only the frames the sample proves$")
ERLANG_NAME = re.compile(r"^[^\[;]+:[^:;]+/\d+$")


class Table:
    """A parsed table: processed, received, rows [(count, name, pct, tag)],
    blame (matched, no_erlang) or None.  Unpacks as (processed, received, rows)."""

    def __init__(self, processed, received, rows, blame):
        self.processed, self.received, self.rows, self.blame = processed, received, rows, blame

    def __iter__(self):
        return iter((self.processed, self.received, self.rows))


def parse_table(text, allow_no_rows=False):
    """(processed, received, rows[(count, name, pct, tag)]) of the default
    and --blame outputs.  Fails on any line that is none of: the first
    'processed X/Y samples (Z%)' line, the '--blame' line, the skid summary,
    a row 'COUNT NAME PCT% [TAG]' (README: the last two fields are always
    the percentage and a bracketed tag)."""
    lines = text.splitlines()
    check(lines, "no output")
    m = PROCESSED.match(lines[0])
    check(m, "first line is not 'processed X/Y samples (Z%)'", text[:500])
    processed, received = int(m.group(1)), int(m.group(2))
    check(processed <= received, "processed %d > received %d" % (processed, received), text[:500])
    if received:
        check(abs(float(m.group(3)) - 100.0 * processed / received) <= 0.051,
              "'processed' percentage %s is not %d/%d" % (m.group(3), processed, received))
    rows, blame, bad = [], None, []
    for line in lines[1:]:
        r = ROW.match(line)
        if r:
            rows.append((int(r.group(1)), r.group(2), float(r.group(3)), r.group(4)))
            continue
        b = BLAME.match(line)
        if b and blame is None and not rows:
            blame = (int(b.group(2)), int(b.group(3)))
            continue
        if SKID.match(line):
            continue
        c = CAPTURE.match(line)
        if c:
            check(int(c.group(3)) == processed and int(c.group(2)) <= processed,
                  "--skid-summary's capture line does not match the %d processed samples: %r"
                  % (processed, line))
            continue
        bad.append(line)
    check(not bad, "%d line(s) of the table are not 'COUNT NAME PCT%% [TAG]' rows: %r"
          % (len(bad), bad[:3]), text[:3000])
    if not allow_no_rows:
        check(processed > 0, "no samples processed (%d received)" % received, text[:500])
        check(rows, "no rows in the table", text[:1000])
    denom = blame[0] if blame is not None else processed
    for count, name, pct, tag in rows:
        want = 100.0 * count / denom if denom else 0.0
        check(abs(pct - want) <= 0.0051 + 1e-9,
              "row %r: %.2f%% is not its count %d over %d samples" % (name, pct, count, denom),
              text[:2000])
    counts = [r[0] for r in rows]
    check(counts == sorted(counts, reverse=True), "rows are not sorted, most samples first",
          text[:2000])
    check(sum(counts) <= denom, "rows add up to %d, more than the %d samples" % (sum(counts), denom),
          text[:2000])
    return Table(processed, received, rows, blame)


def parse_folded(text, allow_empty=False):
    """[(frames root first, count)] of --format folded output; every line
    must be 'FRAME;...;FRAME COUNT'."""
    stacks = []
    for line in text.splitlines():
        m = re.match(r"^(\S.*) (\d+)$", line)
        check(m and int(m.group(2)) > 0, "not a folded line: %r" % line, text[:2000])
        stacks.append((m.group(1).split(";"), int(m.group(2))))
    if not allow_empty:
        check(stacks, "no folded stacks")
    return stacks


def erlang_rows(rows):
    return [r for r in rows if r[3] == "[Erlang]"]


def loaded_functions(vm, need=None):
    """The functions of the modules loaded in VM, and in a JIT VM the JIT's
    own code (erts_beamasm:normal_exit/0, the stub every process's stack
    ends in, ...: registered under a module that is never loaded, as a
    clean erlang-write-perf-map of the same VM names them; only looked up
    when NEED, the names to check, has such a name, or NEED is None)."""
    text = vm.eval_raw("xb_inspect:functions()").decode("utf-8")
    names = {line.rsplit(" ", 1)[0] for line in text.splitlines() if line}
    if vm.flavor == "jit" and (need is None or any(n.startswith("erts_beamasm:") for n in need)):
        from xbtest import read_perf_map, run_tool, tmpdir
        path = os.path.join(tmpdir(), "loaded-jit.map")
        r = run_tool("erlang-write-perf-map", "-o", path, str(vm.pid), timeout=60)
        check(r.rc == 0, "erlang-write-perf-map (the JIT's own code) failed", r.describe())
        names |= {name for _, _, name in read_perf_map(path) if name.startswith("erts_beamasm:")}
    return names


def check_no_garbage(vm, names, what, expect=None, counts=None, allow_empty=False,
                     max_unexpected=0.02, never=None):
    """Every Erlang frame we printed resolves to a function loaded in the VM.

    names: the Erlang frame names printed (a list; or a dict name -> samples,
    then counts need not be given).  At least one, unless allow_empty.
    expect: a regex (or list of them) for the functions the workload can be
    running.  A frame pinned on a neighbour names a loaded function too, just
    the wrong one: names outside expect may carry at most max_unexpected of
    the samples (counts: name -> samples; without counts, none may).
    never: a regex of names that must not appear at all (functions that
    exist but the workload never calls)."""
    if isinstance(names, dict):
        counts = dict(names)
        names = list(names)
    names = set(names)
    check(names or allow_empty, "%s: no Erlang frames printed at all" % what)
    if not names:
        return
    loaded = loaded_functions(vm, names)
    bad = sorted(n for n in names if n not in loaded)
    check(not bad, "%s printed Erlang frames that name no loaded function: %s" % (what, bad[:10]))
    if never:
        nv = sorted(n for n in names if re.search(never, n))
        check(not nv, "%s printed functions the workload never runs (a neighbour's name?): %s"
              % (what, nv[:10]))
    if expect:
        pats = [expect] if isinstance(expect, str) else list(expect)
        odd = sorted(n for n in names if not any(re.search(p, n) for p in pats))
        if counts:
            total = sum(counts.values())
            n_odd = sum(counts.get(n, 0) for n in odd)
            check(n_odd <= max(2, max_unexpected * total),
                  "%s: %d of %d samples name functions the workload does not run (a neighbour "
                  "of the right one?): %s" % (what, n_odd, total,
                                              ", ".join("%s %d" % (n, counts.get(n, 0))
                                                        for n in sorted(odd, key=lambda n: -counts.get(n, 0))[:8])))
        else:
            check(not odd, "%s printed functions the workload does not run (a neighbour of "
                  "the right one?): %s" % (what, odd[:10]))
        log("%s: %d distinct Erlang frames, all loaded, %d outside the workload's functions"
            % (what, len(names), len(odd)))
    else:
        log("%s: %d distinct Erlang frames, all loaded functions" % (what, len(names)))


def sample(vm, *args, timeout=60):
    r = run_tool(TOOL, *(list(args) + [str(vm.pid)]), timeout=timeout * time_scale())
    check(r.rc == 0 and not r.timed_out, "erlang-sample %s failed (exit %s)" % (" ".join(args), r.rc),
          r.describe())
    return r


def sample_folded(vm, seconds, min_samples=300, extra=()):
    """erlang-sample -v --format folded for SECONDS: (received, processed,
    [(frames root first, count)], result).  Needs min_samples processed: on a
    loaded machine the sampled threads get less CPU (cpu-clock samples CPU
    time), so the run is repeated with twice the duration (up to 3 times)
    instead of failing for want of evidence."""
    for attempt in range(3):
        r = sample(vm, "-d", str(seconds), "-v", "--format", "folded", *extra,
                   timeout=60 + 2 * seconds)
        pm = re.search(r"received (\d+), processed (\d+)", r.err)
        check(pm, "no statistics line with -v", r.err)
        received, processed = int(pm.group(1)), int(pm.group(2))
        if processed >= min_samples:
            break
        log("only %d samples processed in %s s: sampling again for %s s"
            % (processed, seconds, 2 * seconds))
        seconds *= 2
    check(processed >= min_samples, "only %d samples processed (need %d) after %d attempts"
          % (processed, min_samples, attempt + 1), r.err)
    stacks = parse_folded(r.out)
    check(sum(n for _, n in stacks) == processed,
          "folded counts add to %d, -v says processed %d" % (sum(n for _, n in stacks), processed))
    return received, processed, stacks, r


def build_sched_nif(target, outdir):
    """tests/workloads/xb_sched_nif.c against the target VM's own erl_nif.h;
    returns the path without ".so"."""
    incs = [os.path.join(target.root, "lib", "erlang", "usr", "include"),
            os.path.join(target.root, "usr", "include")]
    # a container's root holds erlang-base alone: the host's erl_nif.h
    # (OTP 25's NIF API; a later VM loads a NIF of an older minor version)
    incs.append("/usr/lib/erlang/usr/include")
    inc = next((d for d in incs if os.path.exists(os.path.join(d, "erl_nif.h"))), None)
    check(inc is not None, "no erl_nif.h of %s (looked in %s)" % (target.name, ", ".join(incs)))
    so = os.path.join(outdir, "xb_sched_nif.so")
    r = run_cmd(["gcc", "-shared", "-fPIC", "-O2", "-g", "-Wall", "-Werror", "-I", inc, "-o", so,
                 os.path.join(WORKLOADS, "xb_sched_nif.c"), "-lpthread"])
    check(r.rc == 0, "building xb_sched_nif.so failed", r.describe())
    log("NIF built with %s" % os.path.join(inc, "erl_nif.h"))
    return so[:-3]


class SplitClock:
    """The time xb_split spends in hot_a/1 and hot_b/1, read from the VM
    when made and at .share(): the measured truth for a sample of the
    split taken in between.  The nominal split (75 of xb_split:start(75))
    holds only when a unit of work costs the same in both functions, and
    the JIT places each VM's code anew (CI once sampled 81.7/18.3 for
    75/25; its log could not tell the tool from the CPU, this clock can).

    By default wall time (xb_split:times/0), which counts an OS preemption
    as time in the function preempted: good on a machine with a CPU to
    spare, 3-8 points off on a saturated one.  With cpu=TARGET the CPU
    time of the scheduler thread around each part (xb_split:cpu_times/0,
    through xb_sched_nif built for TARGET): what a sampler of on-CPU time
    measures, however saturated the machine."""

    def __init__(self, vm, nominal=None, cpu=None):
        self.vm, self.nominal, self.cpu = vm, nominal, cpu is not None
        if self.cpu:
            from xbtest import tmpdir
            # once per VM (a NIF library is not loaded twice)
            if vm.eval("is_integer(catch xb_sched_nif:thread_cpu_ns())").strip() != "true":
                vm.eval('ok = xb_sched_nif:load("%s")' % build_sched_nif(cpu, tmpdir()))
            vm.eval("xb_split:cpu_clock()")
        self.t0 = self._read()

    def _read(self):
        if self.cpu:
            out = self.vm.eval("xb_split:cpu_times()")
            m = re.fullmatch(r"\{(\d+),(\d+),(\d+),(\d+)\}", out.strip())
            check(m, "xb_split:cpu_times() returned %r" % out)
            return tuple(int(x) for x in m.groups())
        out = self.vm.eval("xb_split:times()")
        m = re.fullmatch(r"\{(\d+),(\d+)\}", out.strip())
        check(m, "xb_split:times() returned %r" % out)
        return int(m.group(1)), int(m.group(2))

    def share(self):
        """hot_a/1's share (percent) of the time in hot_a/1 + hot_b/1 since
        this clock was made."""
        now = self._read()
        da, db = now[0] - self.t0[0], now[1] - self.t0[1]
        check(da > 0 and db > 0 and da + db >= 100e6,
              "xb_split ran only %.3f s in hot_a/hot_b while sampled" % ((da + db) / 1e9))
        extra = ""
        if self.cpu:
            cycles, lost = now[2] - self.t0[2], now[3] - self.t0[3]
            # A cycle during which the process changed threads is not
            # timed; they are rare (both parts of a cycle run without a
            # wait), and many would leave the clock with too little.
            check(lost <= 0.1 * (cycles + lost),
                  "xb_split's CPU clock: %d of %d cycles changed threads" % (lost, cycles + lost))
            extra = ", CPU time, %d cycles (%d not timed: changed threads)" % (cycles, lost)
        truth = 100.0 * da / (da + db)
        log("xb_split's own clock: hot_a/1 %.1f %% of %.2f s in hot_a/hot_b%s%s"
            % (truth, (da + db) / 1e9, extra, "" if self.nominal is None else " (nominal %d)" % self.nominal))
        return truth


def stats(r):
    """The -v statistics of a finished run (xbtest.sample_stats), required."""
    from xbtest import sample_stats
    st = sample_stats(r.err)
    check(st, "no -v statistics line", r.err[-2000:])
    return st


def check_drops(st, what, allowed=("too stale", "process moved on"), max_other=0.05):
    """A floor that does not depend on the machine's load: samples dropped
    for reasons other than `allowed` (which a loaded machine causes: the
    process or its stack moved on before we read it) are at most max_other
    of those received, and the processed ones are the evidence."""
    other = {k: v for k, v in st["drops"].items() if k not in allowed and v}
    n_other = sum(other.values())
    check(n_other <= max_other * st["received"],
          "%s: %d of %d samples dropped for reasons a loaded machine does not explain: %s"
          % (what, n_other, st["received"], other))
    load = {k: v for k, v in st["drops"].items() if k in allowed and v}
    if load:
        log("%s: dropped for staleness (load): %s" % (what, load))


# A normal scheduler thread's name: N_scheduler to OTP 26, erts_sched_N from
# OTP 27 (erl_process.c; the release tables' thread_fmt).
SCHEDULER_COMM = re.compile(r"^(?:(\d+)_scheduler|erts_sched_(\d+))$")


def thread_names(pid):
    """{tid: name (comm, cut at 15 bytes)} of process PID's threads now
    (one that exits meanwhile is left out)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                out[int(tid)] = f.read().strip()
        except OSError:
            continue
    return out


def scheduler_tids(vm):
    """{N: tid} of the VM's normal scheduler threads."""
    out = {}
    for tid, comm in thread_names(vm.pid).items():
        m = SCHEDULER_COMM.match(comm)
        if m:
            out[int(m.group(1) or m.group(2))] = tid
    return out


def scheduler_cpu_ns(vm):
    """CPU time (ns) each of the VM's normal scheduler threads has used so
    far: {tid: ns}."""
    out = {}
    for tid in scheduler_tids(vm).values():
        try:
            with open("/proc/%d/task/%d/schedstat" % (vm.pid, tid)) as f:
                out[tid] = int(f.read().split()[0])
        except OSError:
            pass
    return out


def wait_running(vm, name, timeout=10):
    """Synchronise on an event, not a sleep: the registered process NAME
    exists and its reductions are growing (it runs)."""
    expr = ("case whereis(%s) of undefined -> -1; P -> case process_info(P, reductions) of "
            "{reductions, R} -> R; _ -> -1 end end" % name)
    first = [None]

    def moving():
        v = int(vm.eval(expr))
        if v < 0:
            return False
        if first[0] is None:
            first[0] = v
            return False
        return v > first[0]
    check(wait_for(moving, timeout * time_scale(), 0.05), "process %s is not running" % name)


def wait_sampling(p, errpath, timeout=10):
    """Wait until a background erlang-sample -v has started sampling (its
    start line, 'N code entries'); fails if it exits first."""
    def started():
        try:
            with open(errpath) as f:
                if "code entries" in f.read():
                    return True
        except OSError:
            pass
        if p.poll() is not None:
            raise AssertionError("erlang-sample exited %s before sampling:\n%s"
                                 % (p.returncode, open(errpath).read()[-2000:]))
        return False
    check(wait_for(started, timeout * time_scale(), 0.02), "erlang-sample did not start sampling",
          open(errpath).read()[-2000:])


def function_starts(vm):
    """Interpreter: sorted [(start address, name)] of every loaded function
    (erts_debug:disassemble/1, xb_inspect)."""
    text = vm.eval_raw("xb_inspect:functions()").decode("utf-8")
    out = []
    for line in text.splitlines():
        name, addr = line.rsplit(" ", 1)
        if addr != "-":
            out.append((int(addr, 16), name))
    out.sort()
    return out


def check_frame_addresses(frames, truth, what):
    """frames: [(address, name, innermost)] as --pstack printed them.
    truth: [(start, end, name)] sorted by start -- the VM's own view (its
    +JPperf map, or the interpreter's function starts).  Each address (a
    return address: address - 1) must lie inside an entry of that name: a
    frame named after its neighbour fails here even though the neighbour is
    a loaded function."""
    import bisect
    starts = [t[0] for t in truth]
    wrong = []
    def at(a):
        i = bisect.bisect_right(starts, a) - 1
        return truth[i][2] if i >= 0 and a < truth[i][1] else None
    for addr, name, innermost in frames:
        # The sampled pc or I is inside its function; a return address is
        # just after its call (address - 1 is in the caller).
        got = [at(addr - 1), at(addr)] if not innermost else [at(addr), at(addr - 1)]
        if name not in got:
            wrong.append("0x%x %s: the VM says %s" % (addr, name, got[0] or "no function"))
    check(frames, "%s: no Erlang frames to check" % what)
    check(not wrong, "%s: %d of %d Erlang frames are not at the address of the function "
          "they name" % (what, len(wrong), len(frames)), "\n".join(wrong[:10]))
    log("%s: %d Erlang frames at their functions' addresses" % (what, len(frames)))


def has_pmu():
    """Does this machine have a hardware cycles event?  Independent check:
    perf stat (linux-perf) opening 'cycles' on a trivial command."""
    perf = shutil.which("perf")
    if not perf:
        xbtest.skip_because("needs-package", None, "perf (linux-perf) is not installed; tests/run-all.sh "
                            "installs it")
    r = run_cmd([perf, "stat", "-x,", "-e", "cycles", "--", "true"], timeout=30)
    line = next((l for l in r.err.splitlines() if "cycles" in l), "")
    return bool(line) and "<not supported>" not in line and "<not counted>" not in line


class Hogs:
    """PER_CORE busy loops per core (default 2), outside the VM, for the
    with-block: a saturated machine (test_capture, bench/drain_bench.py)."""

    def __init__(self, per_core=2):
        self.n = per_core * (os.cpu_count() or 1)
        self.procs = []

    def __enter__(self):
        for _ in range(self.n):
            p = subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
            # killed by tests/conftest.py after the test even if the test was (a hog
            # left behind loads every later test)
            xbtest._track(p, "hog")
            self.procs.append(p)
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
            p.wait()
            xbtest._untrack(p)
        return False
