"""--live (a top view in the terminal) and the progress line.

--live runs in a real terminal: tmux, 80x24; the screen must show the
workload's hot function and refresh; 'q' exits 0, ^C exits and so does
the end of -d, all leaving the terminal as they found it (main screen, cursor on, canonical
mode and echo).  Without a terminal on stdout it refuses with one line.
The progress line appears on stderr only when stderr is a terminal.
"""

import os
import pty
import re
import select
import shutil
import signal
import subprocess
import time

from xbtest import (asan, VM, check, log, per_vm, run_cmd, run_tool, skip_because, spawn_tool, timeout, tmpdir,
                    tool_path, wait_for)
from xbsample import has_pmu, wait_running

TOOL = "erlang-sample"


def tmux(*args, check_rc=True):
    r = subprocess.run(["tmux"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=20)
    if check_rc and r.returncode != 0:
        raise AssertionError("tmux %s: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


class Tmux:
    """A detached tmux session of 80x24 running CMD in sh; killed at the end."""

    count = 0

    def __init__(self, cmd):
        if not shutil.which("tmux"):
            skip_because("needs-package", None, "tmux is not installed (tests/run-all.sh installs it)")
        # A socket of its own per session: a second session on the first
        # one's socket could reach its server while kill-server still
        # ends it ("server exited unexpectedly", CI).
        Tmux.count += 1
        self.name = "xblive%d-%d" % (os.getpid(), Tmux.count)
        self.sock = os.path.join(tmpdir(), "tmux-%d.sock" % Tmux.count)
        tmux("-S", self.sock, "new-session", "-d", "-s", self.name, "-x", "80", "-y", "24",
             "sh", "-c", cmd)

    def t(self, *args, check_rc=True):
        return tmux("-S", self.sock, *args, check_rc=check_rc)

    def screen(self):
        return self.t("capture-pane", "-p", "-t", self.name)

    def keys(self, *k):
        self.t("send-keys", "-t", self.name, *k)

    def flag(self, fmt):
        return self.t("display-message", "-p", "-t", self.name, fmt).strip()

    def kill(self):
        self.t("kill-server", check_rc=False)


def live_run(vm, key):
    """Run --live in tmux, check it draws and refreshes, press KEY, and return
    (exit status, stty -a after, tmux flags after)."""
    d = tmpdir()
    # files of this run only: a second run must not read the first's
    rcf, sttyf = os.path.join(d, "rc-%d" % (Tmux.count + 1)), os.path.join(d, "stty-%d" % (Tmux.count + 1))
    for f in (rcf, sttyf):
        if os.path.exists(f):
            os.unlink(f)
    # the shell survives ^C (a trap, so the tool gets the default disposition)
    cmd = "trap true INT; %s --live %d; echo $? > %s; stty -a > %s; sleep 60" % (
        tool_path(TOOL), vm.pid, rcf, sttyf)
    tm = Tmux(cmd)
    try:
        first = wait_for(lambda: (lambda s: s if "xb_split:hot_a/1" in s else None)(tm.screen()), 15)
        check(first, "the live screen never showed xb_split:hot_a/1", tm.screen())
        lines = first.splitlines()
        check(len(lines) <= 24 and all(len(l) <= 80 for l in lines), "screen larger than 80x24")
        el = re.search(r"  (\d+) s", lines[0])
        check(el, "no elapsed time on the first line", first)
        later = wait_for(lambda: (lambda s: s if re.search(r"  (\d+) s", s.splitlines()[0]) and
                                  re.search(r"  (\d+) s", s.splitlines()[0]).group(1) != el.group(1)
                                  else None)(tm.screen()), 5)
        check(later, "the screen did not refresh within 5 s", tm.screen())
        check(tm.flag("#{alternate_on}") == "1", "--live does not use the alternate screen")
        log("live screen:\n" + "\n".join(later.splitlines()[:8]))
        # laid out for the 24 rows: the title on the first, the keys on
        # the last; the event, processed/received and the rate
        rows = later.split("\n")[:24]
        check(len(rows) == 24 and rows[0].startswith("erlang-sample --live: PID %d" % vm.pid) and
              rows[23].startswith("q quit") and " p pause " in rows[23],
              "not laid out on 24 rows (title first, keys last)", later)
        m = re.search(r"^event (\S+); processed (\d+)/(\d+) samples \((\d+\.\d)%\); (\d+) samples/s$",
                      later, re.M)
        # (cpu-clock here, no PMU; cycles where the host has one)
        check(m and m.group(1) == ("cycles" if has_pmu() else "cpu-clock") and int(m.group(2)) <= int(m.group(3)) and
              int(m.group(5)) >= 100, "no event / processed / rate line (or a rate under 100/s)", later)
        # p pauses (the screen holds still, says so), p resumes
        tm.keys("p")
        check(wait_for(lambda: "[paused" in tm.screen(), 5), "'p' did not pause", tm.screen())
        time.sleep(0.2)
        held = tm.screen()
        time.sleep(2.2)
        check(tm.screen() == held, "the screen changed while paused", held)
        tm.keys("p")
        check(wait_for(lambda: (lambda x: x != held and "[paused" not in x)(tm.screen()), 5),
              "'p' again did not resume", tm.screen())
        tm.keys("s")
        check(wait_for(lambda: "by total" in tm.screen(), 5), "'s' did not switch the sort", tm.screen())
        tm.keys(*key)
        # stty -a's whole output (it ends with a newline), after the exit status
        check(wait_for(lambda: os.path.exists(sttyf) and open(sttyf).read().endswith("\n"), 15),
              "--live did not exit after %s" % (key,), tm.screen())
        with open(rcf) as f:
            rc = int(f.read().strip())
        with open(sttyf) as f:
            stty = f.read()
        flags = (tm.flag("#{alternate_on}"), tm.flag("#{cursor_flag}"))
        return rc, stty, flags
    finally:
        tm.kill()


def live_for_duration(vm, seconds):
    """--live -d SECONDS in tmux, left to end by itself: (exit status, stty
    -a after, tmux flags after, whether it drew the workload first)."""
    d = tmpdir()
    rcf, sttyf = os.path.join(d, "rc-d-%d" % (Tmux.count + 1)), os.path.join(d, "stty-d-%d" % (Tmux.count + 1))
    cmd = "%s --live -d %d %d; echo $? > %s; stty -a > %s; sleep 60" % (
        tool_path(TOOL), seconds, vm.pid, rcf, sttyf)
    tm = Tmux(cmd)
    try:
        drawn = wait_for(lambda: "xb_split:hot_a/1" in tm.screen(), 15)
        check(wait_for(lambda: os.path.exists(sttyf) and open(sttyf).read().endswith("\n"), seconds + 30),
              "--live -d %d did not end" % seconds, tm.screen())
        with open(rcf) as f:
            rc = int(f.read().strip())
        with open(sttyf) as f:
            stty = f.read()
        return rc, stty, (tm.flag("#{alternate_on}"), tm.flag("#{cursor_flag}")), drawn
    finally:
        tm.kill()


@per_vm(only=["stock"])
@asan("the live view")
def test_live(target):
    with VM(target) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        for key, want_rc in ((("q",), 0), (("C-c",), 0)):
            rc, stty, (alt, cursor) = live_run(vm, key)
            log("%s: exit %d, alternate screen %s, cursor %s" % (key[0], rc, alt, cursor))
            check(rc == want_rc, "--live exit status %d after %s" % (rc, key[0]))
            check(re.search(r"(^|\s)icanon(\s|$)", stty) and re.search(r"(^|\s)echo(\s|$)", stty),
                  "terminal not restored after %s (stty -a)" % key[0], stty)
            check(alt == "0" and cursor == "1",
                  "after %s: alternate screen %s, cursor %s" % (key[0], alt, cursor))

        # -d: the run ends by itself, the terminal restored as after q
        rc, stty, (alt, cursor), drawn = live_for_duration(vm, 3)
        log("-d 3: exit %d, alternate screen %s, cursor %s" % (rc, alt, cursor))
        check(drawn, "--live -d 3 never drew xb_split:hot_a/1")
        check(rc == 0, "--live -d 3 exit status %d" % rc)
        check(re.search(r"(^|\s)icanon(\s|$)", stty) and re.search(r"(^|\s)echo(\s|$)", stty),
              "terminal not restored at the end of -d (stty -a)", stty)
        check(alt == "0" and cursor == "1", "at the end of -d: alternate screen %s, cursor %s" % (alt, cursor))

        r = run_tool(TOOL, "--live", vm.pid, timeout=30)
        check(r.rc == 2 and "not one" in r.err and len(r.lines_err) == 1,
              "--live with stdout not a terminal: want one line and exit 2", r.describe())


def terminal_sane(stty, alt, cursor):
    return (re.search(r"(^|\s)icanon(\s|$)", stty) and re.search(r"(^|\s)echo(\s|$)", stty) and alt == "0"
            and cursor == "1")


@timeout(120)
def test_live_signals_restore_the_terminal():
    """^Z, ^\\ and SIGHUP while --live draws (on a fake VM, fakebeam 'jit
    ok'): the terminal is put back each time (main screen, cursor on,
    canonical mode and echo; only an atexit did it, so these left the
    alternate screen, a hidden cursor and no echo); after ^Z, fg takes the
    screen again and q ends the run with exit 0."""
    import test_hostile
    exe = test_hostile.build_fixture(os.path.join(tmpdir(), "vm"))
    d = tmpdir()
    f = {k: os.path.join(d, k) for k in ("rc1", "stty1", "rc2", "stty2", "rc3", "stty3", "rc4", "stty4")}
    with test_hostile.Fixture(exe, "jit", "ok") as fx:
        live = "env EXTROSPECT_LAYOUT_UNPROVEN=1 %s --live %d" % (tool_path(TOOL), fx.pid)
        # bash with job control: the tool in a process group of its own
        # (a stop in an orphaned one is discarded), fg after ^Z
        # each step waits for the test's go-file (GO1..GO3) before the
        # next, so that the terminal is looked at before it moves on
        go = [os.path.join(d, "go%d" % i) for i in (1, 2, 3)]
        wait = "while [ ! -e %s ]; do sleep 0.05; done"
        cmd = ("bash -c 'set -m; ulimit -c 0; %s; echo $? > %s; stty -a > %s; %s; fg; echo $? > %s; "
               "stty -a > %s; %s; %s; echo $? > %s; stty -a > %s; %s; %s; echo $? > %s; stty -a > %s; "
               "sleep 60'" % (live, f["rc1"], f["stty1"], wait % go[0], f["rc2"], f["stty2"], wait % go[1],
                              live, f["rc3"], f["stty3"], wait % go[2], live, f["rc4"], f["stty4"]))
        tm = Tmux(cmd)
        try:
            def drawn():
                return wait_for(lambda: "fake:spin/0" in tm.screen() and tm.flag("#{alternate_on}") == "1", 15)

            def after(n, timeout=15):
                check(wait_for(lambda: os.path.exists(f["stty%d" % n]) and
                               open(f["stty%d" % n]).read().endswith("\n"), timeout),
                      "step %d did not end" % n, tm.screen())
                with open(f["rc%d" % n]) as fh:
                    rc = int(fh.read().strip())
                # (tmux takes a moment to act on what the tool wrote)
                wait_for(lambda: tm.flag("#{alternate_on}") == "0" and tm.flag("#{cursor_flag}") == "1", 3)
                with open(f["stty%d" % n]) as fh:
                    return rc, fh.read(), tm.flag("#{alternate_on}"), tm.flag("#{cursor_flag}")

            check(drawn(), "--live never drew fake:spin/0", tm.screen())
            tm.keys("C-z")
            rc, stty, alt, cursor = after(1)
            log("^Z: exit %d, alternate screen %s, cursor %s" % (rc, alt, cursor))
            check(rc == 128 + 20, "after ^Z the shell saw exit %d, not a stop (148)" % rc)
            check(terminal_sane(stty, alt, cursor), "terminal not restored while stopped by ^Z: alternate screen "
                  "%s, cursor %s" % (alt, cursor), stty)
            # fg: the screen again, then q
            open(go[0], "w").close()
            check(drawn(), "after fg, --live did not draw again", tm.screen())
            tm.keys("q")
            rc, stty, alt, cursor = after(2)
            check(rc == 0 and terminal_sane(stty, alt, cursor), "q after ^Z and fg: exit %d, alternate screen "
                  "%s, cursor %s" % (rc, alt, cursor), stty)
            open(go[1], "w").close()
            check(drawn(), "the second --live never drew", tm.screen())
            tm.keys("C-\\")
            rc, stty, alt, cursor = after(3)
            log("^\\: exit %d, alternate screen %s, cursor %s" % (rc, alt, cursor))
            check(rc == 128 + 3, "after ^\\ exit %d, not SIGQUIT's (131)" % rc)
            check(terminal_sane(stty, alt, cursor), "terminal not restored after ^\\: alternate screen %s, "
                  "cursor %s" % (alt, cursor), stty)
            open(go[2], "w").close()
            check(drawn(), "the third --live never drew", tm.screen())

            def live_pid():
                for p in os.listdir("/proc"):
                    try:
                        with open("/proc/%s/cmdline" % p, "rb") as fh:
                            argv = fh.read().split(b"\0")
                    except OSError:
                        continue
                    if argv[:1] == [tool_path(TOOL).encode()] and b"--live" in argv:
                        return int(p)
                return None
            pid = wait_for(live_pid, 5)
            check(pid, "the third --live's process not found")
            os.kill(pid, signal.SIGHUP)
            rc, stty, alt, cursor = after(4)
            log("SIGHUP: exit %d, alternate screen %s, cursor %s" % (rc, alt, cursor))
            check(rc == 128 + 1, "after SIGHUP exit %d, not SIGHUP's (129)" % rc)
            check(terminal_sane(stty, alt, cursor), "terminal not restored after SIGHUP: alternate screen %s, "
                  "cursor %s" % (alt, cursor), stty)
        finally:
            tm.kill()


@per_vm(only=["stock"])
@timeout(120)
def test_live_by_process(target):
    """--live --by process: a top of the processes.  Two registered workers
    with a 2:1 CPU ratio by construction (xb_sched:ratio) are its two top
    rows, "<pid> xb_w2" and "<pid> xb_w1", their totals 67/33 within 8
    points of each other's sum; with --blame, only the processes under the
    blamed function (none here: the workers run Erlang code only)."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_sched:ratio(2, 1)")
        w2 = vm.eval("pid_to_list(whereis(xb_w2))").strip().strip('"')
        w1 = vm.eval("pid_to_list(whereis(xb_w1))").strip().strip('"')
        tm = Tmux("%s --live --by process %d; sleep 60" % (tool_path(TOOL), vm.pid))
        try:
            row = re.compile(r"^\s*(\d+)\s+(\d+\.\d)%\s+(\d+)\s+(\d+\.\d)%\s+(<[\d.]+>.*?) \[group\]$", re.M)

            def enough():
                scr = tm.screen()
                tot = {m.group(5): int(m.group(3)) for m in row.finditer(scr)}
                a, b = tot.get("%s xb_w2" % w2, 0), tot.get("%s xb_w1" % w1, 0)
                return (scr, a, b) if a + b >= 1500 else None
            got = wait_for(enough, 30)
            check(got, "--live --by process never showed xb_w2 and xb_w1 with 1,500 samples", tm.screen())
            scr, a, b = got
            log("live --by process:\n" + "\n".join(scr.splitlines()[:8]))
            check("samples by process" in scr and "GROUP (by last window)" in scr,
                  "the screen does not say it shows processes", scr)
            tops = [m.group(5) for m in row.finditer(scr)][:2]
            check(sorted(tops) == sorted(["%s xb_w2" % w2, "%s xb_w1" % w1]),
                  "the top two rows are %s, not the workers" % tops, scr)
            share = 100.0 * a / (a + b)
            check(abs(share - 200.0 / 3) <= 8, "xb_w2's share of the workers %.1f%%, not 66.7 +- 8" % share, scr)
            tm.keys("q")
        finally:
            tm.kill()


@per_vm(only=["stock", "otp25-emu-dwarf"])
@timeout(120)
@asan("--live --blame: the live view's blame rows")
def test_live_blame(target):
    """--live --blame erts_garbage_collect in tmux ("--by
    process/--blame FN views where those options exist"): the screen says
    what it blames and how many samples had it, the count grows, the top
    row is the allocating process's function xb_gc:alloc_loop/1 (as
    test_sample.test_blame_gc finds it in the table) with most of the
    blamed samples; q exits 0 and leaves the terminal sane."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_gc:start()")
        wait_running(vm, "xb_alloc")
        d = tmpdir()
        rcf, sttyf = os.path.join(d, "rc"), os.path.join(d, "stty")
        tm = Tmux("%s --live --blame erts_garbage_collect %d; echo $? > %s; stty -a > %s; sleep 60"
                  % (tool_path(TOOL), vm.pid, rcf, sttyf))
        try:
            head = re.compile(r"^blame erts_garbage_collect: (\d+) samples had it on their stack$", re.M)
            row = re.compile(r"^\s*(\d+)\s+(\d+\.\d)%\s+(\d+)\s+(\d+\.\d)%\s+(\S.*?) (\[[^]]*\])$", re.M)

            def blamed(least):
                scr = tm.screen()
                m = head.search(scr)
                rows = [(r.group(5), int(r.group(3)), float(r.group(4))) for r in row.finditer(scr)]
                return (scr, int(m.group(1)), rows) if m and int(m.group(1)) >= least and rows else None
            got = wait_for(lambda: blamed(30), 30)
            check(got, "--live --blame never showed 30 blamed samples", tm.screen())
            first = got[1]
            got = wait_for(lambda: blamed(first + 1), 10)
            check(got, "the blamed count did not grow from %d" % first, tm.screen())
            scr, n, rows = got
            log("live --blame:\n" + "\n".join(scr.splitlines()[:8]))
            lines = scr.split("\n")[:24]
            check(len(lines) == 24 and lines[0].startswith("erlang-sample --live: PID %d" % vm.pid) and
                  lines[23].startswith("q quit"), "not laid out on 24 rows", scr)
            check(rows[0][0] == "xb_gc:alloc_loop/1" and rows[0][2] >= 50,
                  "the top --blame row is %r, not xb_gc:alloc_loop/1 with most of the samples" % (rows[0],), scr)
            check(sum(t for _, t, _ in rows) <= n, "the rows hold more samples (%d) than were blamed (%d)"
                  % (sum(t for _, t, _ in rows), n), scr)
            tm.keys("q")
            # stty -a's whole output (it ends with a newline), after the exit status
            check(wait_for(lambda: os.path.exists(sttyf) and open(sttyf).read().endswith("\n"), 15),
                  "--live --blame did not exit after q", tm.screen())
            rc = int(open(rcf).read().strip())
            stty = open(sttyf).read()
            check(rc == 0, "--live --blame exit status %d after q" % rc)
            check(re.search(r"(^|\s)icanon(\s|$)", stty) and re.search(r"(^|\s)echo(\s|$)", stty),
                  "terminal not restored after q (stty -a)", stty)
            check(tm.flag("#{alternate_on}") == "0", "still on the alternate screen after q")
        finally:
            tm.kill()


@per_vm(only=["stock"])
@timeout(120)
def test_live_window_and_interval(target):
    """--live-window and --live-interval do what they say ("the
    hottest functions over the last N seconds and since start", "refreshes
    every second (--live-interval)"): with --live-interval 3 the elapsed
    time on the first row moves in steps of about 3 s (1 s by default);
    with --live-window 2 the column says "last 2s", and once the workload
    has changed (xb_split stopped, xb_sched's two workers started) the old
    hot function keeps its total but its window count falls to 0 while
    the new workload's function tops the window."""
    with VM(target, schedulers=2) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        tm = Tmux("%s --live --live-window 2 --live-interval 3 %d; sleep 60" % (tool_path(TOOL), vm.pid))
        try:
            row = re.compile(r"^\s*(\d+)\s+(\d+\.\d)%\s+(\d+)\s+(\d+\.\d)%\s+(\S.*?) (\[[^]]*\])$", re.M)

            def rows(scr):
                return {m.group(5): (int(m.group(1)), int(m.group(3))) for m in row.finditer(scr)}
            # the refreshes: the elapsed seconds of each screen seen, polled every 0.1 s
            seen, t_end = [], time.monotonic() + 14
            while time.monotonic() < t_end:
                m = re.search(r"  (\d+) s", tm.screen().split("\n")[0])
                if m and (not seen or int(m.group(1)) != seen[-1]):
                    seen.append(int(m.group(1)))
                time.sleep(0.1)
            steps = [b - a for a, b in zip(seen, seen[1:])]
            log("--live-interval 3: elapsed seconds on the screens seen %s" % seen)
            check(len(steps) >= 2 and all(2 <= d <= 6 for d in steps) and sum(steps) >= 2.5 * len(steps),
                  "--live-interval 3: the screen's elapsed time moved in steps of %s s, not about 3" % steps,
                  tm.screen())
            scr = tm.screen()
            check(re.search(r"^\s*last 2s\s+%\s+total", scr, re.M), "the window column is not 'last 2s'", scr)
            hot = rows(scr).get("xb_split:hot_a/1")
            check(hot and hot[0] > 0 and hot[1] > 0, "xb_split:hot_a/1 is not in the window before the change",
                  scr)
            vm.eval("xb_split:stop()")
            vm.eval("xb_sched:ratio(2, 1)")

            def changed():
                scr = tm.screen()
                r = rows(scr)
                order = [m.group(5) for m in row.finditer(scr)]
                a = r.get("xb_split:hot_a/1")
                if a and a[0] == 0 and a[1] > 0 and order and order[0].startswith("xb_sched:") \
                        and r[order[0]][0] > 0:
                    return scr
                return None
            got = wait_for(changed, 20, 0.2)
            check(got, "after the change, xb_split:hot_a/1 did not fall to 0 in the 2 s window (keeping its "
                  "total) with an xb_sched function on top", tm.screen())
            log("after the change:\n" + "\n".join(got.splitlines()[:9]))
            tm.keys("q")
        finally:
            tm.kill()


@per_vm(only=["stock"])
def test_progress_line(target):
    """-o FILE for 4 s: progress on a terminal stderr, nothing on a pipe,
    nothing for a run under 2 s, nothing when the result goes to stdout
    on the screen; stdout sent to a file by the shell (`> p.folded`) is a
    run that writes to a file: progress."""
    with VM(target) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        out = os.path.join(tmpdir(), "p.folded")
        def on_a_terminal(seconds, to_file=True, stdout=subprocess.DEVNULL):
            """stderr text of a -d SECONDS run whose stderr is a pty, and its exit status."""
            master, slave = pty.openpty()
            dest = ["--format", "folded", "-o", out] if to_file else []
            p = subprocess.Popen([tool_path(TOOL), "-d", str(seconds)] + dest + [str(vm.pid)],
                                 stdin=subprocess.DEVNULL, stdout=stdout, stderr=slave,
                                 start_new_session=True)
            os.close(slave)
            got = b""
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                r, _, _ = select.select([master], [], [], 0.5)
                if r:
                    try:
                        b = os.read(master, 4096)
                    except OSError:
                        break
                    if not b:
                        break
                    got += b
                elif p.poll() is not None:
                    break
            p.wait(10)
            os.close(master)
            return got.decode("utf-8", "replace"), p.returncode

        # a run of 1 s: no progress at all (it shows from 2 s on)
        text, rc = on_a_terminal(1)
        check(rc == 0 and "processed" not in text and "\r" not in text,
              "progress on a terminal for a run under 2 s (exit %s)" % rc, text)
        text, rc = on_a_terminal(4)
        log("stderr on a terminal: %r" % text[-200:])
        check(rc == 0, "exit %s" % rc, text)
        check(re.search(r"erlang-sample: \d+/4 s, \d+ samples, \d+\.\d% processed", text),
              "no progress line on a terminal stderr", text)
        check(text.endswith("\r\x1b[K") or "\r\x1b[K" in text, "the progress line is not erased", text)
        # the table on stdout (no -o), stderr a terminal: the result is on
        # the screen, no progress line goes with it
        text, rc = on_a_terminal(3, to_file=False)
        check(rc == 0 and "processed" not in text and "\r" not in text,
              "progress on a terminal while the table goes to stdout (exit %s)" % rc, text)
        # `> p.txt`: the table goes to a file: progress, and the file holds
        # the table alone
        redirected = os.path.join(tmpdir(), "p.txt")
        with open(redirected, "w") as f:
            text, rc = on_a_terminal(3, to_file=False, stdout=f)
        check(rc == 0 and re.search(r"erlang-sample: \d+/3 s, \d+ samples", text),
              "no progress line with stdout sent to a file (exit %s)" % rc, text)
        table = open(redirected).read()
        check(table.startswith("processed ") and "\r" not in table and "xb_split:hot_a/1" in table,
              "the redirected table is not the table alone", table[:500])
        r = run_tool(TOOL, "-d", "3", "--format", "folded", "-o", out, vm.pid, timeout=30)
        check(r.rc == 0 and "processed" not in r.err and "\r" not in r.err,
              "progress text on stderr that is not a terminal", r.describe())
