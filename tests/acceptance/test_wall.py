"""erlang-sample --wall: a wall-clock profile of the processes.  Every
process is counted once per tick (-F, default 20 a second) under its state
([running], [runnable], [waiting], ...) with its Erlang stack below it, in
the table, the stack formats and --by process."""

import re

from xbtest import VM, check, log, per_vm, run_tool, timeout

TOOL = "erlang-sample"
RATE = 20      # the default tick rate
DURATION = 2   # -d
STATES = ("[running]", "[runnable]", "[waiting]", "[suspended]", "[garbage collecting]", "[exiting]")


def wall(vm, *args, timeout=60):
    r = run_tool(TOOL, "--wall", "-d", str(DURATION), *[str(a) for a in args], str(vm.pid), timeout=timeout)
    check(r.rc == 0 and not r.timed_out, "erlang-sample --wall %s: exit %s" % (" ".join(map(str, args)), r.rc),
          r.describe())
    return r


def ticks_of(r):
    """The ticks the run's note on stderr counts (R: a run, or its stderr)."""
    err = r if isinstance(r, str) else r.err
    m = re.search(r"--wall: (\d+) ticks at ([\d.]+) Hz", err)
    check(m, "no --wall note on stderr", err)
    return int(m.group(1))


def folded(text):
    """{stack: count} of folded lines."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(.*) (\d+)$", line)
        check(m, "not a folded line: %r" % line)
        out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def expected_count(r):
    """Samples one process has in a run: one per tick, ticks ~ rate x
    duration (the first tick comes one period in)."""
    n = ticks_of(r)
    want = RATE * DURATION
    check(abs(n - want) <= 3, "%d ticks in %d s at %d Hz (expected %d +- 3)" % (n, DURATION, RATE, want), r.err)
    return n


def start(vm):
    vm.eval("xb_wall:start()", timeout=30)
    return {name: vm.eval("pid_to_list(whereis(%s))" % name).strip().strip('"')
            for name in ("xb_wall_busy", "xb_wall_waiter", "xb_wall_sleeper")}


@per_vm(only=["stock", "otp25-emu-dwarf"])  # (both flavours; otp29-jit passes too)
@timeout(120)
def test_wall_folded_states_and_counts(target):
    """A busy process, one blocked in a receive in a known function, one in
    timer:sleep: --by process --format folded gives each one sample per
    tick (rate x duration, +- 3, and no more than the ticks); the busy one
    >= 90% under [running]/[runnable], >= 70% of them with its function
    spin/1; the waiting ones >= 95% [waiting] under their known frames.
    Without --by, the same stacks have no process root."""
    with VM(target, schedulers=2) as vm:
        pids = start(vm)
        r = wall(vm, "--by", "process", "--format", "folded")
        n = expected_count(r)
        st = folded(r.out)
        per = {}
        for stack, c in st.items():
            frames = stack.split(";")
            check(len(frames) >= 2 and frames[1] in STATES, "stack without a state under its process: %r" % stack)
            per.setdefault(frames[0], {})
            per[frames[0]][";".join(frames[1:])] = per[frames[0]].get(";".join(frames[1:]), 0) + c
        got = {}
        for name, pid in pids.items():
            group = "%s %s" % (pid, name)
            check(group in per, "no samples of %s (%s); groups: %s" % (name, pid, sorted(per)[:20]), r.out)
            got[name] = per[group]
            total = sum(per[group].values())
            check(abs(total - n) <= 3 and total <= n, "%s: %d samples in %d ticks (expected one per tick, -3)"
                  % (name, total, n), "%s\n%s" % (per[group], r.err))

        def share(name, pred):
            s = got[name]
            return sum(c for k, c in s.items() if pred(k)) / float(sum(s.values()))

        busy_state = share("xb_wall_busy", lambda k: k.split(";")[0] in ("[running]", "[runnable]"))
        busy_fn = share("xb_wall_busy", lambda k: k.split(";")[0] in ("[running]", "[runnable]")
                        and k.endswith("xb_wall:spin/1"))
        check(busy_state >= 0.9 and busy_fn >= 0.7, "busy: %.0f%% running/runnable, %.0f%% of them in spin/1"
              % (100 * busy_state, 100 * busy_fn), got["xb_wall_busy"])
        waiter = share("xb_wall_waiter", lambda k: k == "[waiting];xb_wall:outer/0;xb_wall:wait_here/0")
        check(waiter >= 0.95, "waiter: %.0f%% [waiting] in outer/0 -> wait_here/0" % (100 * waiter),
              got["xb_wall_waiter"])
        sleeper = share("xb_wall_sleeper", lambda k: k.startswith("[waiting];xb_wall:nap/0;timer:sleep/1"))
        check(sleeper >= 0.95, "sleeper: %.0f%% [waiting] in nap/0 -> timer:sleep/1" % (100 * sleeper),
              got["xb_wall_sleeper"])
        # without --by: the states are the roots
        r = wall(vm, "--format", "folded")
        n = expected_count(r)
        st = folded(r.out)
        check(all(k.split(";")[0] in STATES for k in st), "a root that is not a state: %s"
              % [k for k in st if k.split(";")[0] not in STATES][:5])
        w = st.get("[waiting];xb_wall:outer/0;xb_wall:wait_here/0", 0)
        check(n - 3 <= w <= n, "[waiting];xb_wall:outer/0;xb_wall:wait_here/0 %d in %d ticks" % (w, n), r.out)
        log("busy %.0f%% running/runnable (%s); waiter %.0f%%, sleeper %.0f%% waiting; %d ticks"
            % (100 * busy_state, got["xb_wall_busy"], 100 * waiter, 100 * sleeper, n))


@per_vm(only=["stock"])
@timeout(120)
def test_wall_by_process_table(target):
    """The default table with --by process: a block per process, named by
    its registered name, with its states' shares: the waiter ~100% waiting
    (>= 95%) in wait_here/0, with one sample per tick; the table's header
    gives the states of all."""
    with VM(target, schedulers=2) as vm:
        pids = start(vm)
        r = wall(vm, "--by", "process", "-t", "1000")
        n = expected_count(r)
        m = re.search(r"^== %s xb_wall_waiter: (\d+) samples.*\n   states: (.*)\n\s+(\d+)\s+(\S+)"
                      % re.escape(pids["xb_wall_waiter"]), r.out, re.M)
        check(m, "no block for %s xb_wall_waiter with its states" % pids["xb_wall_waiter"], r.out)
        samples, states, top_count, top_fn = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
        waiting = re.search(r"waiting ([\d.]+)%", states)
        check(waiting and float(waiting.group(1)) >= 95, "xb_wall_waiter's states: %s" % states, r.out)
        check(abs(samples - n) <= 3 and samples <= n, "xb_wall_waiter: %d samples in %d ticks" % (samples, n))
        check(top_fn == "xb_wall:wait_here/0" and top_count >= 0.95 * samples,
              "xb_wall_waiter's top row: %d %s of %d" % (top_count, top_fn, samples), r.out)
        # the busy process's block: running or runnable
        m = re.search(r"^== %s xb_wall_busy: \d+ samples.*\n   states: (.*)" % re.escape(pids["xb_wall_busy"]),
                      r.out, re.M)
        check(m, "no block for xb_wall_busy with its states", r.out)
        busy = sum(float(x) for x in re.findall(r"(?:running|runnable) ([\d.]+)%", m.group(1)))
        check(busy >= 90, "xb_wall_busy's states: %s" % m.group(1), r.out)
        # without --by: a states line over all
        r = wall(vm)
        m = re.search(r"^states: (.*)$", r.out, re.M)
        check(m and "waiting" in m.group(1), "no states line in the table", r.out)
        log("waiter: %d samples in %d ticks, %s; busy: %.0f%% running or runnable" % (samples, n, states, busy))


@per_vm(only=["stock"])
@timeout(120)
def test_wall_subset_scaled(target):
    """Above --wall-max-processes, a random subset per tick, each sample
    counted for 1/p: a note says so with the error it implies (on stderr,
    and in the table), and the total stays about processes x ticks (within
    15%)."""
    with VM(target, schedulers=2) as vm:
        start(vm)
        r = wall(vm, "--wall-max-processes", "10", "--format", "folded")
        n = ticks_of(r)
        m = re.search(r"([\d.]+) processes per tick on average .* (\d+) samples", r.err)
        check(m, "no processes per tick in the note", r.err)
        procs = float(m.group(1))
        check("above --wall-max-processes 10" in r.err and "standard deviation" in r.err,
              "no note on the subset", r.err)
        total = sum(folded(r.out).values())
        want = procs * n
        check(abs(total - want) <= 0.15 * want, "scaled total %d, expected %.0f (%.0f processes x %d ticks)"
              % (total, want, procs, n), r.err)
        # the table says so too
        r = wall(vm, "--wall-max-processes", "10")
        check(re.search(r"^note: above --wall-max-processes 10, .* standard deviation", r.out, re.M),
              "no note on the subset in the table", r.out)
        log("subset: %d samples for %.0f processes x %d ticks" % (total, procs, n))


@per_vm(only=["stock"])
@timeout(60)
def test_wall_bad_input(target):
    """--wall with a mode or output it does not go with: one line, exit 2,
    nothing on standard output."""
    with VM(target, schedulers=1) as vm:
        for args, words in [(["--pstack"], "--pstack"), (["--dump"], "--dump"), (["--format", "json"], "json"),
                            (["--by", "thread"], "--by"), (["-F", "5000"], "1000"),
                            (["--blame", "copy_struct"], "--blame")]:
            r = run_tool(TOOL, "--wall", *args, str(vm.pid), timeout=30)
            lines = [l for l in r.err.splitlines() if l.strip()]
            check(r.rc == 2 and len(lines) == 1 and words in lines[0] and "--wall" in lines[0] and not r.out,
                  "--wall %s: exit %s, stderr %r, stdout %r" % (" ".join(args), r.rc, lines, r.out[:200]))
        r = run_tool(TOOL, "--wall-max-processes", "5", str(vm.pid), timeout=30)
        lines = [l for l in r.err.splitlines() if l.strip()]
        check(r.rc == 2 and len(lines) == 1 and "--wall" in lines[0], "--wall-max-processes alone: exit %s, %r"
              % (r.rc, lines))


@per_vm(only=["stock", "otp25-emu-dwarf"])  # (both flavours; otp29-jit passes too)
@timeout(120)
def test_wall_runnable_on_one_scheduler(target):
    """Four busy processes on one scheduler (+S 1) at -F 50: at any moment
    one runs and three wait in the run queue, so over the four together
    [running] is 25% +- 7 and [runnable] the rest, and each one is
    [runnable] 75% +- 15 of its samples, one sample per tick."""
    with VM(target, schedulers=1) as vm:
        vm.eval("xb_wall:busy(4)", timeout=30)
        pids = {vm.eval("pid_to_list(whereis(xb_wall_busy%d))" % i).strip().strip('"'): i for i in range(1, 5)}
        r = run_tool(TOOL, "--wall", "-F", "50", "-d", "3", "--by", "process", "--format", "folded", str(vm.pid),
                     timeout=60)
        check(r.rc == 0 and not r.timed_out, "erlang-sample --wall -F 50: exit %s" % r.rc, r.describe())
        n = ticks_of(r)
        check(abs(n - 150) <= 8, "%d ticks in 3 s at 50 Hz" % n, r.err)
        per = {}
        for stack, c in folded(r.out).items():
            frames = stack.split(";")
            pid = frames[0].split(" ")[0]
            if pid in pids:
                per.setdefault(pid, {}).setdefault(frames[1], 0)
                per[pid][frames[1]] += c
        check(len(per) == 4, "samples of %d of the 4 busy processes" % len(per), r.out)
        running = sum(s.get("[running]", 0) for s in per.values())
        total = sum(sum(s.values()) for s in per.values())
        shares = []
        for pid, s in sorted(per.items()):
            t = sum(s.values())
            check(set(s) <= {"[running]", "[runnable]"}, "%s: states %s" % (pid, s))
            check(abs(t - n) <= 3 and t <= n, "%s: %d samples in %d ticks" % (pid, t, n), s)
            shares.append(100.0 * s.get("[runnable]", 0) / t)
            check(abs(shares[-1] - 75) <= 15, "%s: runnable %.0f%% (expected 75 +- 15)" % (pid, shares[-1]), s)
        check(abs(100.0 * running / total - 25) <= 7, "running %.0f%% of the 4 busy processes' samples "
              "(expected 25 +- 7)" % (100.0 * running / total), per)
        log("4 busy on one scheduler: running %.1f%% of %d samples; runnable per process %s"
            % (100.0 * running / total, total, ", ".join("%.0f%%" % x for x in shares)))


@per_vm(only=["stock"])
@timeout(120)
def test_wall_every_format(target):
    """One run written as folded, flame graph, speedscope and pprof (-o
    four times), each read as test_formats reads the on-CPU profiles: the
    SVG well-formed and self-contained, with a [waiting] frame and the
    waiter's function above it; speedscope valid against its schema, the
    waiter's stack [waiting] -> outer/0 -> wait_here/0; go tool pprof
    -traces shows the same stack; pprof's sample type is wall time."""
    import gzip
    import os
    import sys
    from xbtest import tmpdir
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_formats import check_svg_file, frame_titles, load_speedscope, pprof_traces, stacks_of
    with VM(target, schedulers=2) as vm:
        start(vm)
        d = tmpdir()
        files = {ext: os.path.join(d, "w" + ext) for ext in (".folded", ".svg", ".speedscope.json", ".pb.gz")}
        r = run_tool(TOOL, "--wall", "-d", "1", *[a for f in files.values() for a in ("-o", f)], str(vm.pid),
                     timeout=60)
        check(r.rc == 0 and not r.timed_out, "erlang-sample --wall -o x4: exit %s" % r.rc, r.describe())
        fold = open(files[".folded"]).read()
        check("[waiting];xb_wall:outer/0;xb_wall:wait_here/0 " in fold and "[running]" in fold, "folded", fold)
        root, _ = check_svg_file(files[".svg"])
        titles = [t[0] for t in frame_titles(root)]
        check("[waiting]" in titles and "xb_wall:wait_here/0" in titles and "[running]" in titles,
              "the flame graph's frames: %s" % titles[:40])
        doc = load_speedscope(files[".speedscope.json"])
        want = ["[waiting]", "xb_wall:outer/0", "xb_wall:wait_here/0"]
        stacks = [st for prof in doc["profiles"] for st, w in stacks_of(doc, prof)]
        check(want in stacks, "no speedscope stack %s; some: %s" % (want, stacks[:10]))
        traces, out = pprof_traces(files[".pb.gz"])
        check(any(fr[:3] == want[::-1] for _, fr in traces), "go tool pprof -traces: no %s" % want[::-1], out)
        pb = gzip.open(files[".pb.gz"]).read()
        check(b"wall" in pb and b"cpu" not in pb, "pprof: the sample type is not wall time")


def _wall_until(vm, end):
    """erlang-sample --wall --format folded with no -d, ended by END(proc)
    about 1.5 s in: (exit status, folded stacks, stderr)."""
    import os
    import subprocess
    import time
    from xbtest import tmpdir, tool_path
    out, err = os.path.join(tmpdir(), "wall.out"), os.path.join(tmpdir(), "wall.err")
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([tool_path(TOOL), "--wall", "--format", "folded", str(vm.pid)], stdout=o, stderr=e,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        time.sleep(1.5)
        end(p)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            check(False, "erlang-sample --wall did not end within 10 s")
    return rc, folded(open(out).read()), open(err).read()


@per_vm(only=["stock"])
@timeout(120)
def test_wall_ends_on_sigint_and_vm_exit(target):
    """--wall without -d: ^C (SIGINT) ends it within 10 s, exit 0, with
    what was gathered (the waiter counted in every tick); the VM's exit
    ends it the same way, with the note saying the VM exited."""
    import os
    import signal
    with VM(target, schedulers=2) as vm:
        start(vm)
        rc, st, err = _wall_until(vm, lambda p: p.send_signal(signal.SIGINT))
        n = ticks_of(err)
        w = st.get("[waiting];xb_wall:outer/0;xb_wall:wait_here/0", 0)
        check(rc == 0 and n >= 10 and n - 3 <= w <= n, "after ^C: exit %s, %d ticks, waiter %d" % (rc, n, w), err)
        rc, st, err = _wall_until(vm, lambda p: os.kill(vm.pid, signal.SIGKILL))
        vm.kill()
        w = st.get("[waiting];xb_wall:outer/0;xb_wall:wait_here/0", 0)
        check(rc == 0 and w >= 10 and "exited" in err, "after the VM's exit: exit %s, waiter %d" % (rc, w), err)
        log("^C and the VM's exit: results written (waiter %d samples)" % w)


@per_vm(only=["stock"])
@timeout(120)
def test_wall_suspended(target):
    """A process suspended (erlang:suspend_process/1) while waiting in
    xb_dump:idle/0: every one of its samples is [suspended] over that
    function, one per tick."""
    with VM(target, schedulers=2) as vm:
        pid = vm.eval("xb_dump:suspended()").strip().strip('"')
        r = wall(vm, "--by", "process", "--format", "folded")
        n = expected_count(r)
        mine = {k: c for k, c in folded(r.out).items() if k.startswith(pid + " xb_dump_suspended;")}
        want = "%s xb_dump_suspended;[suspended];xb_dump:idle/0" % pid
        check(list(mine) == [want] and n - 3 <= mine[want] <= n, "the suspended process: %s in %d ticks" % (mine, n),
              r.out)


@per_vm(only=["stock"])
@timeout(120)
def test_wall_running_blocked_in_a_nif(target):
    """A process whose NIF sleeps 100 ms a call (xb_sched:sleep_nif: its
    scheduler blocked off the CPU, so no CPU sample sees it): [running]
    with its stack read where the scheduler blocks (sleep_loop/1, the NIF's
    caller) in >= 80% of its samples, not "[stack not sampled]"."""
    from xbtest import tmpdir
    from xbsample import build_sched_nif, wait_running
    with VM(target, schedulers=2) as vm:
        vm.eval('ok = xb_sched_nif:load("%s")' % build_sched_nif(target, tmpdir()))
        pid = vm.eval("pid_to_list(xb_sched:sleep_nif(100000))").strip().strip('"')
        wait_running(vm, "xb_sleeper")
        r = wall(vm, "--by", "process", "--format", "folded")
        n = expected_count(r)
        head = pid + " xb_sleeper;"
        mine = {k[len(head):]: c for k, c in folded(r.out).items() if k.startswith(head)}
        total = sum(mine.values())
        good = sum(c for k, c in mine.items() if k.startswith("[running];xb_sched:sleep_loop/1"))
        check(abs(total - n) <= 3 and good >= 0.8 * total, "xb_sleeper: %d of %d samples [running] in "
              "sleep_loop/1 (%d ticks)" % (good, total, n), mine)
        log("a NIF sleeping: %d of %d samples with its stack; %s" % (good, total, mine))
