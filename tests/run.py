#!/usr/bin/python3
"""Run extrospect-beam's tests: the C unit tests and the acceptance tests.

    python3 tests/run.py [--suite default|matrix|package|soak|fuzz] [-k SUBSTR] [--vm NAME]...
                         [--timeout SECONDS] [--table] [--no-unit] [--list]
                         [--asan [--asan-all] [--asan-jobs N]] [--strict] [--jobs N]
                         [--capture bpf|perf] [--asan-capture bpf|perf]

Suites (which VM targets the per-VM tests run against):
    default   stock (Debian's /usr/bin/erl), otp25-emu-dwarf, otp25-jit-dwarf
    matrix    stock and every VM tests/build-vms.sh matrix builds (plus any
              other VM in the cache); a VM that is not built is reported as
              SKIP "not built: run tests/build-vms.sh matrix".  Prints a
              table of results per VM (also with --table).
    package   only the tests marked @suite("package"): the Debian package
              built, installed into a clean debootstrapped root and run
              there (slow the first time: debootstrap), against stock.
    soak      only the tests marked @suite("soak"): long runs (a 10-minute
              profile at 997 Hz with RSS and fds watched), default targets.
    fuzz      only the tests marked @suite("fuzz"): long fuzzing (libFuzzer
              targets, 120 s each) and fault injection, default targets.
--vm NAME (repeatable) restricts the targets to those named.
-k SUBSTR runs only the tests whose id (e.g. "test_perfmap.test_watch[stock]"
or "unit.atom_quote_plain") contains SUBSTR; repeated, those matching any.

Every test runs in a forked process of its own (own process group) with a
time limit (--timeout, default 120 s; @xbtest.timeout overrides); a test that
hangs is killed and reported as FAIL, and every VM it started is killed.

Always failures (exit 2 before anything runs, with the summary line): an
unknown --vm name, a -k that selects nothing, build/ (or build-asan/ with
--asan) not built or older than its sources (tests/lib/xbtest.py
build_problem: "run ./build.sh").  A run in which no test passed fails.

--strict (run-all.sh uses it): a skip is a FAIL unless raised with
xbtest.skip_because(KEY, target) for a documented reason (xbtest.SKIP_REASONS,
tests/README.md) that applies to the target and is acceptable in CI; a target
that is not built is a FAIL; so is a test that no target of the suite runs.

--asan: afterwards, with build-asan/ (ids get @asan): the unit tests,
every test without a target, every test that asks for no particular VM (in
the default suite on the flavour its plain run did not use, so each such
test runs once on each of the stock JIT and the interpreter), and the
flavour-specific tests marked @asan (paths no other sanitized test runs),
each once (on the interpreter where it runs there, else the stock JIT:
ASAN_TARGETS); --asan-all: every test once.  Tests marked @no_asan never
(timing, not memory safety, is measured).  --asan-jobs N runs that pass as
N processes at once (run-all.sh: 2), each with every N-th test.  Wall-clock
limits are scaled (xbtest.time_scale) and time limits doubled.  Under every run, each test's tools write sanitizer reports to a
directory of the test (ASAN_OPTIONS/UBSAN_OPTIONS log_path), and any report
there fails the test, also from tools started in the background.

--jobs N: the plain pass's tests as N run.py processes at once (each with
every N-th test and its own run directory), after the tests marked @alone,
which run first with nothing beside them.

--capture PATH: erlang-sample takes that capture path wherever a test does
not name one (EXTROSPECT_CAPTURE); --asan-capture PATH: the same for the
sanitizer pass only.  run-all.sh: --asan-capture perf, so the plain pass
runs every test on the default path (BPF, where the kernel allows it) and
the sanitized pass on the perf path.

Output: one line per result:
    PASS name[vm] (1.2s)
    FAIL name[vm]: reason          (detail indented below)
    SKIP name[vm]: why
and last exactly one line "N passed, N failed, N skipped".  Exit status 1 if
anything failed, else 0.
"""

import argparse
import fcntl
import importlib.util
import inspect
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import xbtest  # noqa: E402

ACCEPTANCE = os.path.join(HERE, "acceptance")
# Targets whose tests run again under ASan/UBSan with --asan: the stock JIT
# and the interpreter (its own stack-walking code paths).
ASAN_TARGETS = ("stock", "otp25-emu-dwarf")
# What a test that asks for no particular VM runs on in the default suite.
DEFAULT_WIDE_TARGETS = ("stock", "otp25-emu-dwarf")


class Item:
    def __init__(self, tid, fn=None, target=None, skip=None, timeout=None):
        self.id, self.fn, self.target, self.skip, self.timeout = tid, fn, target, skip, timeout
        self.fail = None     # reported as FAIL without running (strict mode)
        self.asan_target = None  # where the sanitizer pass runs it, if not on target


class Counts:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.per_target = {}

    def add(self, status, target_name=None):
        if status == "PASS":
            self.passed += 1
        elif status == "FAIL":
            self.failed += 1
        else:
            self.skipped += 1
        if target_name:
            t = self.per_target.setdefault(target_name, {"PASS": 0, "FAIL": 0, "SKIP": 0})
            t[status] += 1


# Every FAIL line printed (this process's and its shards'): recapped just
# above the summary line, where a log cut in the middle (CI shows its head
# and tail) still shows which tests failed and why.
FAIL_LINES = []


def emit(status, tid, reason=None, elapsed=None, detail=None, logs=()):
    if status == "PASS":
        line = "PASS %s (%.1fs)" % (tid, elapsed or 0.0)
    else:
        line = "%s %s: %s" % (status, tid, reason or "")
        if status == "FAIL" and elapsed is not None:
            line += " (%.1fs)" % elapsed
    print(line, flush=True)
    if status == "FAIL":
        FAIL_LINES.append(line)
    for text in list(logs) + ([detail] if detail else []):
        for l in str(text).rstrip("\n").splitlines():
            print("    " + l, flush=True)


# ---------------------------------------------------------------------------
# discovery

def load_modules():
    mods = []
    for f in sorted(os.listdir(ACCEPTANCE)):
        if f.startswith("test_") and f.endswith(".py"):
            name = f[:-3]
            spec = importlib.util.spec_from_file_location(name, os.path.join(ACCEPTANCE, f))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            mods.append(mod)
    return mods


def describe_spec(spec):
    return ", ".join("%s=%s" % (k, v) for k, v in spec.items() if v is not None) or "any"


def collect(mods, targets, default_timeout, suite="default", unmatched_fails=False, explicit_vms=False):
    items = []
    for mod in mods:
        fns = [(name, fn) for name, fn in vars(mod).items()
               if name.startswith("test_") and inspect.isfunction(fn)
               and fn.__module__ == mod.__name__]
        fns.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
        for name, fn in fns:
            if suite not in getattr(fn, "xb_suites", ("default", "matrix")):
                continue
            base = "%s.%s" % (mod.__name__, name)
            tmo = getattr(fn, "xb_timeout", default_timeout)
            spec = getattr(fn, "xb_per_vm", None)
            asan_on = None
            if spec is None:
                items.append(Item(base, fn, None, None, tmo))
                continue
            matched = [t for t in targets if xbtest.target_matches(t, spec)]
            # The default suite runs a test that asks for no particular VM
            # on one of the stock JIT and the interpreter, the same one in
            # every run (by a hash of its name: about half the tests on
            # each flavour), and the sanitizer pass runs it on the other;
            # the JIT with DWARF (the stock VM's code with its symbols)
            # runs the tests that ask for it, or for DWARF, and the matrix
            # runs every test on every VM.  Tests whose promise differs by
            # flavour ask for both (only=[...]).  (Keeps the default suite
            # within its time; --vm selects any target.)
            if suite == "default" and not any(spec.get(k) for k in ("flavor", "debug", "only", "exclude")) \
                    and not explicit_vms:
                wide = [t for t in matched if t.name in DEFAULT_WIDE_TARGETS]
                # (a test left out of the sanitizer pass runs on both)
                if len(wide) == len(DEFAULT_WIDE_TARGETS) and not getattr(fn, "xb_no_asan", None):
                    pick = zlib.crc32(base.encode()) % len(wide)
                    matched = [wide[pick]]
                    asan_on = wide[1 - pick]
                else:
                    matched = wide or matched
            if not matched:
                why = "no selected VM matches (%s)" % describe_spec(spec)
                if unmatched_fails:
                    it = Item(base, None, None, None, tmo)
                    it.fail = why + ": no target of this suite runs this test"
                    items.append(it)
                else:
                    items.append(Item(base, None, None, why, tmo))
            for t in matched:
                tid = "%s[%s]" % (base, t.name)
                items.append(Item(tid, fn, t, None if t.present else t.missing, tmo))
                items[-1].asan_target = asan_on
    return items


# ---------------------------------------------------------------------------
# running one test in a forked child

def _alarm(signum, frame):
    raise xbtest.TestTimeout()


def _term(signum, frame):
    raise xbtest.TestTimeout()


def sanitizer_env(san_dir):
    """Sanitizer options for the test's process (inherited by every tool it
    runs): reports go to files in san_dir, which the harness checks."""
    os.makedirs(san_dir, exist_ok=True)
    # Tools a test runs as another user (setpriv --reuid=nobody: the
    # privilege tests) write their reports here too: without write access
    # the sanitizer would only print "Can't open file" and exit.
    os.chmod(san_dir, 0o1777)
    parent = os.path.dirname(san_dir)
    os.chmod(parent, os.stat(parent).st_mode | 0o011)
    log = os.path.join(san_dir, "report")
    def add(var, extra):
        cur = os.environ.get(var, "")
        os.environ[var] = (cur + ":" if cur else "") + extra
    add("ASAN_OPTIONS", "log_path=%s:abort_on_error=0" % log)
    add("UBSAN_OPTIONS", "log_path=%s:halt_on_error=1:print_stacktrace=1" % log)
    os.environ["XB_SAN_DIR"] = san_dir


def child_run(item, wfd, strict=False):
    os.setpgid(0, 0)
    xbtest._current["runner"] = True
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGTERM, _term)
    sanitizer_env(os.path.join(xbtest.tmpdir(), "sanitizer"))
    res = {"status": "PASS"}
    t0 = time.monotonic()
    try:
        signal.alarm(max(1, int(item.timeout)))
        try:
            if item.target is not None:
                item.fn(item.target)
            else:
                item.fn()
            xbtest._post_test_checks()
        finally:
            signal.alarm(0)
    except xbtest.Skip as e:
        res = {"status": "SKIP", "reason": str(e)}
        if strict and not xbtest.skip_ok_in_strict(e):
            res = {"status": "FAIL",
                   "reason": "skipped, which --strict does not accept (%s): %s" % (
                       "undocumented reason: use xbtest.skip_because()" if not e.key else
                       "reason %r is not acceptable in CI" % e.key, e)}
        # A test may skip after running a tool: its sanitizer reports and
        # background runs are checked all the same.
        try:
            xbtest._post_test_checks()
        except AssertionError as e2:
            msg = str(e2) or "assertion failed"
            first, _, rest = msg.partition("\n")
            res = {"status": "FAIL", "reason": "(after skipping: %s) %s" % (e, first),
                   "detail": rest}
    except xbtest.TestTimeout:
        res = {"status": "FAIL", "reason": "timed out after %ss" % item.timeout,
               "detail": where(sys.exc_info()[2])}
    except AssertionError as e:
        msg = str(e) or "assertion failed"
        first, _, rest = msg.partition("\n")
        res = {"status": "FAIL", "reason": first,
               "detail": (rest + "\n" if rest else "") + where(sys.exc_info()[2])}
    except BaseException as e:  # noqa: B902 - report everything
        msg = "%s: %s" % (type(e).__name__, e)
        first, _, rest = msg.partition("\n")
        res = {"status": "FAIL", "reason": first,
               "detail": (rest + "\n" if rest else "") + "Traceback (innermost last):\n" +
               "".join(traceback.format_tb(e.__traceback__)[-4:])}
    res["elapsed"] = time.monotonic() - t0
    try:
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        xbtest._cleanup_children()
    except BaseException:
        pass
    res["log"] = xbtest._current["log"]
    tmp = xbtest._current["tmp"]
    if tmp and not os.environ.get("XB_KEEP_TMP"):
        shutil.rmtree(tmp, True)
    data = json.dumps(res).encode()
    view = memoryview(data)
    while view:
        n = os.write(wfd, view)
        view = view[n:]
    os.close(wfd)


def where(tb):
    """file:line of the innermost frame in a test file."""
    frames = traceback.extract_tb(tb)
    for fr in reversed(frames):
        if os.path.dirname(os.path.abspath(fr.filename)) == ACCEPTANCE:
            return "at %s:%d" % (os.path.basename(fr.filename), fr.lineno)
    if frames:
        fr = frames[-1]
        return "at %s:%d" % (os.path.basename(fr.filename), fr.lineno)
    return ""


def run_item(item, run_dir, strict=False):
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            child_run(item, w, strict)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    t0 = time.monotonic()
    hard = item.timeout + 20  # the child's own alarm fires first
    chunks = []
    killed = False
    while True:
        left = t0 + hard - time.monotonic()
        if left <= 0:
            killed = True
            break
        rl, _, _ = select.select([r], [], [], min(left, 1.0))
        if rl:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
    if killed:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    os.close(r)
    _, status = os.waitpid(pid, 0)
    # A test that lost track of a VM (or was killed) must not leave it running.
    xbtest.kill_registered(run_dir)
    elapsed = time.monotonic() - t0
    if killed:
        return {"status": "FAIL", "reason": "timed out after %ss (killed)" % item.timeout,
                "elapsed": elapsed}
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        return {"status": "FAIL", "elapsed": elapsed,
                "reason": "test process died (wait status %d) without a result" % status}


# ---------------------------------------------------------------------------
# C unit tests

def unit_case_ids():
    """unit.NAME of every case the unit tests run (the run_case calls of
    tests/unit/*.c), for -k before anything runs."""
    src = ""
    unit_dir = os.path.join(HERE, "unit")
    for name in sorted(os.listdir(unit_dir)) if os.path.isdir(unit_dir) else ():
        if name.endswith(".c"):
            with open(os.path.join(unit_dir, name)) as f:
                src += f.read()
    return ["unit"] + ["unit." + n for n in re.findall(r'run_case\("([^"]+)"', src)]


def run_unit(ksubs, counts, suffix="", env=None):
    """ksubs: None (all cases) or the -k substrings (cases matching any);
    env: the environment to run them in (its XB_BUILD_DIR picks the build),
    else this process's."""
    def sel(tid):
        return not ksubs or any(k in tid for k in ksubs)
    build = env["XB_BUILD_DIR"] if env else xbtest.build_dir()
    path = os.path.join(build, "tests", "unit", "test_unit")
    if not os.access(path, os.X_OK):
        if not ksubs or any(k in "unit" for k in ksubs):
            emit("FAIL", "unit", "%s not built (run ./build.sh)" % path)
            counts.add("FAIL")
        return
    r = xbtest.run_cmd([path], timeout=60, env=env)
    cases, last = [], None
    for line in r.out.splitlines():
        if line.startswith("ok "):
            last = ["PASS", line[3:].strip(), None, []]
            cases.append(last)
        elif line.startswith("not ok "):
            name, _, why = line[7:].partition(": ")
            last = ["FAIL", name.strip(), why.strip() or "failed", []]
            cases.append(last)
        elif line.startswith("#") and last is not None:
            last[3].append(line)
    # Sanitizer reports (XB_BUILD_DIR=build-asan) on stderr, pinned on the
    # case named by the last "# case NAME" marker.
    san, cur = {}, None
    for line in r.err.splitlines():
        if line.startswith("# case "):
            cur = line[7:].strip()
        elif any(t in line for t in xbtest.SANITIZER_TEXT):
            san.setdefault(cur, []).append(line.strip())
    for c in cases:
        if c[1] in san:
            c[0] = "FAIL"
            c[2] = (c[2] + "; " if c[2] else "") + "sanitizer: " + san[c[1]][0]
            c[3].extend(san[c[1]][1:5])
    n_fail = 0
    for status, name, why, extra in cases:
        tid = "unit.%s%s" % (name, suffix)
        if not sel(tid):
            continue
        if status == "PASS":
            emit("PASS", tid, elapsed=0.0)
        else:
            n_fail += 1
            emit("FAIL", tid, why, detail="\n".join(extra) or None)
        counts.add(status)
    if ksubs and not any(k in "unit" for k in ksubs) and not any(sel("unit." + c[1]) for c in cases):
        return
    bad = r.timed_out or r.rc is None or r.rc < 0 or (r.rc != 0 and not any(
        c[0] == "FAIL" for c in cases)) or not cases
    if bad:
        why = ("timed out" if r.timed_out else "killed by signal %d" % -r.rc if r.rc < 0
               else "exit status %d" % r.rc if r.rc != 0 else "no test cases reported")
        after = (" after case %s" % cases[-1][1]) if cases else ""
        emit("FAIL", "unit[%s]" % os.path.basename(path), why + after,
             detail=(r.out[-1500:] + r.err[-1500:]).strip() or None)
        counts.add("FAIL")


# ---------------------------------------------------------------------------

def print_table(targets, counts):
    rows = [("target", "otp", "flavor", "debug", "pass", "fail", "skip", "")]
    for t in targets:
        c = counts.per_target.get(t.name, {"PASS": 0, "FAIL": 0, "SKIP": 0})
        g = t.guess() if not t.present else t.info
        rows.append((t.name, (t.otp_version if t.present else g.get("otp", "?")),
                     g.get("flavor", "?"), g.get("debug", "?"), str(c["PASS"]),
                     str(c["FAIL"]), str(c["SKIP"]),
                     "" if t.present else "(%s)" % t.missing))
    widths = [max(len(r[i]) for r in rows) for i in range(7)]
    print("", flush=True)
    print("Results by VM (release x flavour x debug level):")
    for r in rows:
        cells = [r[i].ljust(widths[i]) if i < 4 else r[i].rjust(widths[i]) for i in range(7)]
        print("  " + "  ".join(cells) + ("  " + r[7] if r[7] else ""), flush=True)
    print("", flush=True)


def refuse(msg, code=2):
    """A run that cannot be meaningful: say why, and end with the summary
    line (.ci/run reads the last line) counting it as one failure."""
    print("run.py: " + msg, flush=True)
    print("0 passed, 1 failed, 0 skipped", flush=True)
    return code


def run_and_emit(item, run_dir, counts, strict):
    tname = item.target.name if item.target else None
    if item.fail:
        emit("FAIL", item.id, item.fail)
        counts.add("FAIL", tname)
        return
    if item.skip:
        if strict:
            emit("FAIL", item.id, "not run (%s), which --strict does not accept" % item.skip)
            counts.add("FAIL", tname)
        else:
            emit("SKIP", item.id, item.skip)
            counts.add("SKIP", tname)
        return
    res = run_item(item, run_dir, strict)
    emit(res["status"], item.id, res.get("reason"), res.get("elapsed"),
         res.get("detail"), res.get("log", ()))
    counts.add(res["status"], tname)


def claim(queue):
    """The next test index no shard has taken (a counter in the file QUEUE,
    under flock): the shards of a pass share its tests as a queue, each
    taking the next when it is free, so that a pass ends when its last test
    does, not when the shard given the longer share by k % N does (the
    sanitizer pass's two shares were 292 and 208 s apart by more than a
    minute)."""
    fd = os.open(queue, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = os.read(fd, 32)
        v = int(data) if data.strip() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(v + 1).encode())
        return v
    finally:
        os.close(fd)


class Shard:
    """This process's part of a sharded pass: the tests it claims from the
    pass's queue (XB_SHARD_QUEUE), or without one every N-th from the I-th."""

    def __init__(self, i, n):
        self.i, self.n = i, n
        self.queue = os.environ.get("XB_SHARD_QUEUE")
        self.want = claim(self.queue) if self.queue else None

    def mine(self, k):
        """Whether the pass's K-th test (counted alike by every shard, in
        order) is this shard's to run."""
        if self.queue is None:
            return k % self.n == self.i
        if k != self.want:
            return False
        self.want = claim(self.queue)
        return True


def sanitized_env():
    """The environment of the sanitizer pass: the tools and unit tests of
    build-asan/, UBSan halting on its first report."""
    env = dict(os.environ)
    env["XB_BUILD_DIR"] = os.path.join(xbtest.ROOT, "build-asan")
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    return env


def run_shards(args, counts, kind="asan"):
    """A pass as N processes of this script at once, each with its own run
    directory; their output is printed after them, shard by shard, and
    their summary lines added to COUNTS.
      kind "asan": the sanitizer pass, args.asan_jobs processes
        (--asan-shard I/N: every N-th sanitized test from the I-th).  The
        sanitized tests are those whose timing the machine's load does not
        decide (timing tests are @no_asan), and they run with scaled limits.
      kind "plain": the plain pass's tests that are not @alone, args.jobs
        processes (--plain-shard I/N), while nothing else runs."""
    argv = [sys.executable, os.path.abspath(__file__), "--suite", args.suite,
            "--timeout", str(args.timeout)]
    for k in args.ksubs or ():
        argv += ["-k", k]
    for v in args.vm or ():
        argv += ["--vm", v]
    # (the sanitized unit tests ran in the parent, alone: no shard runs them)
    flags = (("--no-unit", True), ("--strict", args.strict), ("--asan-all", args.asan_all))
    if kind == "plain":
        flags = (("--no-unit", True), ("--strict", args.strict))
    for flag, on in flags:
        if on:
            argv.append(flag)
    opts = (("--capture", args.capture), ("--asan-capture", args.asan_capture))
    for opt, val in opts if kind == "asan" else opts[:1]:
        if val:
            argv += [opt, val]
    n = args.asan_jobs if kind == "asan" else args.jobs
    outs = [tempfile.TemporaryFile() for _ in range(n)]
    env = dict(os.environ)
    env["XB_SHARD_QUEUE"] = os.path.join(os.environ["XB_RUN_DIR"], "queue-%s" % kind)
    procs = [subprocess.Popen(argv + ["--%s-shard" % kind, "%d/%d" % (i, n)], stdout=outs[i],
                              stderr=subprocess.STDOUT, env=env) for i in range(n)]
    for p in procs:
        p.wait()
    for i, f in enumerate(outs):
        f.seek(0)
        lines = f.read().decode(errors="replace").splitlines()
        m = None
        if lines:
            m = re.match(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", lines[-1])
        body = lines[:-1] if m else lines
        for l in body:
            if l.startswith("targets: "):
                continue
            if l.startswith("FAIL "):
                FAIL_LINES.append(l)
            print(l, flush=True)
        if m:
            counts.passed += int(m.group(1))
            counts.failed += int(m.group(2))
            counts.skipped += int(m.group(3))
        else:
            line = "FAIL %s shard %d/%d: exit %s without a summary line" % (kind, i, n, procs[i].returncode)
            FAIL_LINES.append(line)
            print(line, flush=True)
            counts.failed += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 1)[1])
    ap.add_argument("--suite", choices=["default", "matrix", "package", "soak", "fuzz"], default="default")
    ap.add_argument("-k", dest="ksubs", metavar="SUBSTR", action="append",
                    help="only tests whose id contains SUBSTR (repeatable: any of them)")
    ap.add_argument("--vm", action="append", metavar="NAME", help="restrict to this target (repeatable)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-test time limit in seconds")
    ap.add_argument("--table", action="store_true", help="print a result table per VM")
    ap.add_argument("--no-unit", action="store_true", help="skip the C unit tests")
    ap.add_argument("--list", action="store_true", help="list test ids and exit")
    ap.add_argument("--asan", action="store_true",
                    help="then run the unit tests, the tests without a target, those that ask "
                         "for no particular VM and those marked @asan again with the ASan/UBSan "
                         "build (build-asan/, XB_SANITIZE=1 ./build.sh), on %s; ids get @asan"
                         % " or ".join(ASAN_TARGETS))
    ap.add_argument("--asan-all", action="store_true",
                    help="with --asan: every test once, not only those the default sanitizer "
                         "pass picks")
    ap.add_argument("--asan-jobs", type=int, default=1, metavar="N",
                    help="with --asan: run the sanitizer pass as N processes at once (each a "
                         "share of its tests; their results printed after them)")
    ap.add_argument("--asan-shard", metavar="I/N", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="run the plain pass's tests as N processes at once (each a share of "
                         "them), except those marked @alone (timing, saturation, real-time "
                         "witnesses), which run first with nothing beside them")
    ap.add_argument("--plain-shard", metavar="I/N", help=argparse.SUPPRESS)
    ap.add_argument("--capture", choices=["bpf", "perf"],
                    help="the capture path erlang-sample takes where a test does not say "
                         "(EXTROSPECT_CAPTURE): --capture perf runs the suite on the perf path")
    ap.add_argument("--asan-capture", choices=["bpf", "perf"],
                    help="the same for the sanitizer pass only (run-all.sh: perf, so that the "
                         "plain pass runs the default path, BPF here, and the sanitized one the "
                         "perf path with its reader threads)")
    ap.add_argument("--time-limit", type=float, metavar="SECONDS",
                    help="count the run as one more failure when it takes longer than this "
                         "(run-all.sh: 1500 for the default suite; tests/soak-saturated.sh "
                         "sets none: a saturated machine stretches every test)")
    ap.add_argument("--strict", action="store_true",
                    help="CI mode: undocumented skips, targets not built and tests no target "
                         "runs are failures")
    args = ap.parse_args()
    shard = pshard = None
    if args.plain_shard:
        # a share of the plain pass's shared tests, for --jobs: nothing else
        i, n = (int(x) for x in args.plain_shard.split("/"))
        pshard = Shard(i, n)
        args.asan = False
        args.no_unit = True
    if args.asan_shard:
        # a share of the sanitizer pass, for --asan-jobs: no plain pass
        i, n = (int(x) for x in args.asan_shard.split("/"))
        shard = Shard(i, n)
        args.asan = True

    known = set(xbtest.all_targets()) | set(xbtest.MATRIX_TARGETS)
    if args.vm:
        unknown = [n for n in args.vm if n not in known]
        if unknown:
            return refuse("unknown --vm %s; known targets: %s" % (
                ", ".join(unknown), ", ".join(sorted(known))))
        names = list(dict.fromkeys(args.vm))
    elif args.suite == "matrix":
        names = xbtest.all_targets()
    elif args.suite == "package":
        names = ["stock"]
    else:
        names = list(xbtest.DEFAULT_TARGETS)
    targets = [xbtest.load_target(n) for n in names]

    t_start = time.monotonic()
    run_dir = tempfile.mkdtemp(prefix="xbrun-")
    os.environ["XB_RUN_DIR"] = run_dir
    if args.capture:
        os.environ["EXTROSPECT_CAPTURE"] = args.capture
    if args.strict:
        os.environ["XB_STRICT"] = "1"
    counts = Counts()
    try:
        mods = load_modules()
        restricted = bool(args.vm or args.ksubs)
        items = collect(mods, targets, args.timeout, args.suite,
                        unmatched_fails=args.strict and not restricted, explicit_vms=bool(args.vm))
        if args.ksubs:
            # (a shard's -k was checked by its parent, unit tests included:
            # the shards run none, and a -k may select only those)
            unit_ids = [] if args.no_unit else unit_case_ids()
            for k in args.ksubs:
                unit_may_match = any(k in u for u in unit_ids)
                if not any(k in i.id for i in items) and not unit_may_match \
                        and not (args.asan_shard or args.plain_shard):
                    return refuse("-k %r selects no test (python3 tests/run.py --list shows the "
                                  "ids)" % k)
            items = [i for i in items if any(k in i.id for k in args.ksubs)]
        if args.list:
            for i in items:
                print(i.id)
            return 0
        dirs = [xbtest.build_dir()] + ([os.path.join(xbtest.ROOT, "build-asan")]
                                       if args.asan else [])
        for d in dirs:
            problem = xbtest.build_problem(d)
            if problem:
                return refuse(problem)
        print("targets: " + ", ".join(
            "%s (%s)" % (t.name, "OTP %s %s %s" % (t.otp_version, t.flavor, t.debug)
                         if t.present else "not available") for t in targets), flush=True)
        if not args.no_unit and shard is None:
            run_unit(args.ksubs, counts)

        def shared(item):
            """May run beside another test (--jobs): not @alone, and runs."""
            return not (item.fail or item.skip or getattr(item.fn, "xb_alone", None))
        if pshard is not None:
            k = -1
            for item in items:
                if shared(item):
                    k += 1
                    if pshard.mine(k):
                        run_and_emit(item, run_dir, counts, args.strict)
        elif shard is None:
            parallel = args.jobs > 1
            for item in items:
                if not (parallel and shared(item)):
                    run_and_emit(item, run_dir, counts, args.strict)
            if parallel and any(shared(i) for i in items):
                run_shards(args, counts, "plain")
        if args.asan and args.asan_jobs > 1 and shard is None:
            if not args.no_unit:
                # The sanitized unit tests first, here, with nothing beside
                # them (the shards run none): some measure a thread's own
                # scheduling (thread_asleep_not_when_starved's sleeper), and
                # beside 3 shards on 2 CPUs its every wakeup waited runnable.
                run_unit(args.ksubs, counts, "@asan", env=sanitized_env())
            run_shards(args, counts)
        elif args.asan:
            # Same tests, sanitizer build: any report fails the test (the
            # tools write them to the test's sanitizer directory; UBSan is
            # built to abort).  Slower tools: wall-clock limits scaled.
            os.environ.update(sanitized_env())
            if args.asan_capture:
                os.environ["EXTROSPECT_CAPTURE"] = args.asan_capture
            if not args.no_unit and shard is None:
                run_unit(args.ksubs, counts, "@asan")
            # Each test once under the sanitizers: on the interpreter
            # where it runs there (its own stack-walking paths), else on
            # the stock JIT; tests without a target as they are.
            def eligible(item):
                # tests without a VM, tests that ask for none, and the
                # flavour-specific ones marked @asan (all with --asan-all)
                spec = getattr(item.fn, "xb_per_vm", None) or {}
                return (args.asan_all or item.target is None or getattr(item.fn, "xb_asan", None)
                        or not any(spec.get(k) for k in ("flavor", "debug", "only", "exclude")))
            on, own = {}, {}
            for item in items:
                if item.fn is None or item.target is None or not eligible(item):
                    continue
                if item.target.name not in ASAN_TARGETS:
                    # a test marked @asan for a path only other VMs have
                    # (a DWARF build's offsets, a JIT with DWARF...): on
                    # its own first target, not dropped in silence
                    if not (item.skip or item.fail) and item.fn not in own:
                        own[item.fn] = item.target.name
                    continue
                prev = on.get(item.fn)
                if prev is None or ASAN_TARGETS.index(item.target.name) > ASAN_TARGETS.index(prev):
                    on[item.fn] = item.target.name
            for fn, name in own.items():
                on.setdefault(fn, name)
            k = -1
            for item in items:
                if item.fail or item.skip or getattr(item.fn, "xb_no_asan", None) or not eligible(item):
                    continue
                if item.target is not None and on.get(item.fn) != item.target.name:
                    continue
                k += 1
                if shard is not None and not shard.mine(k):
                    continue
                if item.asan_target is not None:
                    # a test the plain pass ran on one flavour: the other
                    t = item.asan_target
                    item.target, item.skip = t, None if t.present else t.missing
                    item.id = "%s[%s]" % (item.id.rsplit("[", 1)[0], t.name)
                item.id += "@asan"
                item.timeout *= 2
                run_and_emit(item, run_dir, counts, args.strict)
    except KeyboardInterrupt:
        xbtest.kill_registered(run_dir)
        print("interrupted", flush=True)
        print("%d passed, %d failed, %d skipped" % (counts.passed, counts.failed + 1,
                                                    counts.skipped), flush=True)
        return 130
    finally:
        xbtest.kill_registered(run_dir)
        shutil.rmtree(run_dir, True)
    if args.table or args.suite == "matrix":
        print_table(targets, counts)
    failed = counts.failed
    took = time.monotonic() - t_start
    if not (args.asan_shard or args.plain_shard):
        print("run.py: the run took %d min %02d s" % (took // 60, took % 60), flush=True)
        if args.time_limit and took > args.time_limit:
            FAIL_LINES.append("run.py: the run took %d min %02d s, over its limit of %d min %02d s "
                              "(--time-limit)" % (took // 60, took % 60, args.time_limit // 60,
                                                  args.time_limit % 60))
            failed += 1
    if FAIL_LINES and not (args.asan_shard or args.plain_shard):
        print("failed (%d):" % len(FAIL_LINES), flush=True)
        for l in FAIL_LINES:
            print("  " + (l if len(l) <= 300 else l[:297] + "..."), flush=True)
    if counts.passed == 0 and not (args.asan_shard or args.plain_shard):
        print("run.py: no test passed (%d skipped, %d failed): that is a failure"
              % (counts.skipped, counts.failed), flush=True)
        failed += 1 if not counts.failed else 0
    print("%d passed, %d failed, %d skipped" % (counts.passed, failed, counts.skipped),
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
