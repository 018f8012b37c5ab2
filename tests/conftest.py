"""The acceptance suite's pytest plugin: targets, tiers, strict mode and the
sanitizer pass (tests/README.md says how to run and extend the suite).

Options (besides pytest's own; pytest-timeout's --timeout, pytest-xdist's -n):
    --suite default|matrix|package|soak|fuzz   which targets, which tests
    --vm NAME            only this target (repeatable)
    --strict-suite       CI mode (run-all.sh): a skip without a documented
                         reason acceptable in CI, a target that is not built,
                         a test no target of the suite runs are failures
    --asan               add the sanitizer pass: the chosen tests once more
                         with build-asan/ (ids end in -asan, marker sanitizer)
    --asan-all           with --asan: every test once more
    --capture-path P     erlang-sample's capture path (bpf|perf) where a test
                         names none; --asan-capture P: the sanitizer pass's,
                         if not that one
    --table              a pass/fail/skip table per target at the end
    --results FILE       the counts and failures as JSON (run-all.sh)

Parametrisation: a test marked per_vm (xbtest.per_vm) gets a `target`
argument, one item per matching target of the suite.  In the default suite
a test that asks for no particular VM runs on one of stock and
otp25-emu-dwarf (the same one in every run: a hash of its name) and its
sanitizer twin on the other.  A test without per_vm runs once with no
argument (its sanitizer twin is `NAME[asan]`).

Tiers (markers given to each item, for -m): offline (no target), live (a
target), matrix (a target only the matrix suite has), saturated (marked
alone: run with nothing beside it, so it fails under -n 2; run-all.sh runs
-m saturated first, then -m "not saturated" on two workers), sanitizer (the
build-asan/ twin).

Every test: its own directory (xbtest.tmpdir()), sanitizer reports written
into it (ASAN_OPTIONS/UBSAN_OPTIONS log_path), the background tools' stderr
and the sanitizer reports checked after it returned or skipped, and every
process it started killed afterwards (the tools and VMs xbtest tracks, the
process groups recorded in the run directory, any other descendant), also
after a timeout (pytest-timeout's signal; a test still running 30 s past its
limit has its processes killed and its worker ended).

The run ends with the line "N passed, N failed, N skipped" (an item counts
once: failed if any of its phases failed)."""

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import zlib

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import xbtest  # noqa: E402

SUITES = ("default", "matrix", "package", "soak", "fuzz")
# The sanitizer pass runs a test on the interpreter where the test runs
# there (its own stack-walking paths), else on the stock JIT.
ASAN_TARGETS = ("stock", "otp25-emu-dwarf")
# Where a test that asks for no particular VM runs in the default suite.
DEFAULT_WIDE_TARGETS = ("stock", "otp25-emu-dwarf")
SPEC_KEYS = ("flavor", "debug", "only", "exclude")
MARKERS = {
    "per_vm": "per_vm(flavor=None, debug=None, only=None, exclude=None): run once per matching "
              "target of the suite, as test_x(target)",
    "no_asan": "no_asan(why): not in the sanitizer pass",
    "asan": "asan(why): in the sanitizer pass although it asks for particular VMs",
    "alone": "alone(why): run with nothing beside it (its items get the saturated tier)",
    "suite": "suite(*names): run only in these suites (default: default and matrix)",
    "xb_unrunnable": "xb_unrunnable(why): (set by conftest) no target of the run matches",
    "offline": "tier: runs no VM target",
    "live": "tier: runs against a VM target",
    "matrix": "tier: a target only the matrix suite has",
    "saturated": "tier: runs with nothing beside it (run-all.sh: first, alone)",
    "sanitizer": "tier: the sanitizer pass's twin of a test (build-asan/, limits scaled)",
}


class Run:
    """This process's view of the run (config._xb)."""

    def __init__(self, config):
        opt = config.getoption
        self.suite = opt("suite")
        self.strict = opt("strict_suite")
        self.asan = opt("asan") or opt("asan_all")
        self.asan_all = opt("asan_all")
        self.capture = opt("capture_path")
        self.asan_capture = opt("asan_capture")
        self.vms = list(dict.fromkeys(opt("vm") or ()))
        known = set(xbtest.all_targets()) | set(xbtest.MATRIX_TARGETS)
        self.unknown = [n for n in self.vms if n not in known]
        if self.vms:
            names = [n for n in self.vms if n in known]
        elif self.suite == "matrix":
            names = xbtest.all_targets()
        elif self.suite == "package":
            names = ["stock"]
        else:
            names = list(xbtest.DEFAULT_TARGETS)
        self.targets = [xbtest.load_target(n) for n in names]
        self.worker = getattr(config, "workerinput", {}).get("workerid")
        self.refused = None
        self.status = {}       # nodeid -> passed|failed|skipped (the controller's tally)
        self.why = {}          # nodeid -> first line of a failure
        self.target_of = {}    # nodeid -> target name


def pytest_addoption(parser):
    g = parser.getgroup("extrospect-beam")
    g.addoption("--suite", choices=SUITES, default="default",
                help="which targets and tests (default: %(default)s)")
    g.addoption("--vm", action="append", metavar="NAME", help="only this target (repeatable)")
    g.addoption("--strict-suite", action="store_true",
                help="CI mode: undocumented skips, targets not built and tests no target runs fail")
    g.addoption("--asan", action="store_true", help="add the sanitizer pass (build-asan/)")
    g.addoption("--asan-all", action="store_true", help="the sanitizer pass runs every test")
    g.addoption("--capture-path", choices=["bpf", "perf"],
                help="erlang-sample's capture path where a test names none (EXTROSPECT_CAPTURE)")
    g.addoption("--asan-capture", choices=["bpf", "perf"],
                help="the sanitizer twins' capture path (default: --capture-path; run-all.sh: perf)")
    g.addoption("--table", action="store_true", help="results per target at the end")
    g.addoption("--results", metavar="FILE", help="write the counts and failures to FILE (JSON)")


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", "%s: %s" % (name.split("(")[0], text))
    xb = config._xb = Run(config)
    xbtest._current["runner"] = True
    # One run directory (compiled workloads, derived targets, the process
    # groups to kill) per process that runs tests: the controller's, and one
    # inside it per pytest-xdist worker (which inherit its XB_RUN_DIR).
    if xb.worker:
        d = os.path.join(os.environ["XB_RUN_DIR"], xb.worker)
        os.makedirs(d, exist_ok=True)
    else:
        d = tempfile.mkdtemp(prefix="xbrun-")
    os.environ["XB_RUN_DIR"] = xb.run_dir = d
    if not xb.worker:
        config.pluginmanager.register(Tally(xb), "xb-tally")


def _kill_run_dirs(top):
    for d in [top] + [os.path.join(top, n) for n in os.listdir(top) if n.startswith("gw")]:
        if os.path.isdir(d):
            xbtest.kill_registered(d)


def pytest_unconfigure(config):
    xb = getattr(config, "_xb", None)
    if xb is None or xb.worker:
        return
    if os.path.isdir(xb.run_dir):
        _kill_run_dirs(xb.run_dir)
        shutil.rmtree(xb.run_dir, True)
    counts = {k: sum(1 for v in xb.status.values() if v == k) for k in ("passed", "failed", "skipped")}
    failures = ["%s: %s" % (n, xb.why.get(n, "failed")) for n, v in xb.status.items() if v == "failed"]
    if xb.refused:
        counts["failed"] += 1
        failures.append("conftest: " + xb.refused)
    if config.getoption("results"):
        with open(config.getoption("results"), "w") as f:
            json.dump(dict(counts, failures=failures), f, indent=1)
    if not (config.option.collectonly or config.option.help):
        print("%(passed)d passed, %(failed)d failed, %(skipped)d skipped" % counts, flush=True)


def pytest_report_header(config):
    return "targets: " + ", ".join(
        "%s (%s)" % (t.name, "OTP %s %s %s" % (t.otp_version, t.flavor, t.debug)
                     if t.present else "not available") for t in config._xb.targets)


def pytest_sessionstart(session):
    """Refusals before anything runs (the controller's): an unknown --vm,
    a build directory not built or older than its sources."""
    config = session.config
    xb = config._xb
    if xb.worker or config.option.collectonly:
        return
    if xb.unknown:
        xb.refused = "unknown --vm %s; known targets: %s" % (", ".join(xb.unknown), ", ".join(
            sorted(set(xbtest.all_targets()) | set(xbtest.MATRIX_TARGETS))))
    else:
        for d in [xbtest.build_dir()] + ([os.path.join(xbtest.ROOT, "build-asan")] if xb.asan else []):
            xb.refused = xbtest.build_problem(d)
            if xb.refused:
                break
    if xb.refused:
        pytest.exit("conftest: " + xb.refused, returncode=pytest.ExitCode.USAGE_ERROR)


# ---------------------------------------------------------------------------
# collection: targets, sanitizer twins, suites, tiers, time limits

def _spec(node):
    m = node.get_closest_marker("per_vm")
    return None if m is None else {k: m.kwargs.get(k) for k in SPEC_KEYS}


def _asan_target(matched):
    """Where the sanitizer pass runs a test the plain pass runs on MATCHED:
    the interpreter or the stock JIT when among them, else its first target."""
    ours = [t for t in matched if t.name in ASAN_TARGETS]
    t = max(ours, key=lambda t: ASAN_TARGETS.index(t.name)) if ours else (matched or [None])[0]
    return t if t is not None and t.present else None


def _wants_asan(xb, node, spec):
    """Does the sanitizer pass run this test: tests without a VM, tests that
    ask for none, and the flavour-specific ones marked asan; never those
    marked no_asan; every other one with --asan-all."""
    if not xb.asan or node.get_closest_marker("no_asan"):
        return False
    return (xb.asan_all or spec is None or node.get_closest_marker("asan") is not None
            or not any(spec.values()))


def pytest_generate_tests(metafunc):
    spec = _spec(metafunc.definition)
    if spec is None:
        return
    xb = metafunc.config._xb
    base = "%s.%s" % (metafunc.module.__name__, metafunc.function.__name__)
    matched = [t for t in xb.targets if xbtest.target_matches(t, spec)]
    other = None
    if xb.suite == "default" and not any(spec.values()) and not xb.vms:
        # A test that asks for no particular VM: on one of the stock JIT and
        # the interpreter, the same one in every run (by a hash of its
        # name: about half the tests on each flavour), its sanitizer twin on
        # the other; one left out of the sanitizer pass runs on both.
        wide = [t for t in matched if t.name in DEFAULT_WIDE_TARGETS]
        if len(wide) == len(DEFAULT_WIDE_TARGETS) and not metafunc.definition.get_closest_marker("no_asan"):
            pick = zlib.crc32(base.encode()) % len(wide)
            matched, other = [wide[pick]], wide[1 - pick]
        else:
            matched = wide or matched
    params = [pytest.param(t, id=t.name) for t in matched]
    if not params:
        why = "no target of this run matches (%s)" % (
            ", ".join("%s=%s" % kv for kv in spec.items() if kv[1] is not None) or "any")
        params = [pytest.param(None, id="no-target", marks=pytest.mark.xb_unrunnable(why))]
    if _wants_asan(xb, metafunc.definition, spec):
        t = other if other is not None and other.present else _asan_target(matched)
        if t is not None:
            params.append(pytest.param(t, id=t.name + "-asan", marks=pytest.mark.sanitizer))
    metafunc.parametrize("target", params)


def _target(item):
    cs = getattr(item, "callspec", None)
    return cs.params.get("target") if cs is not None else None


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """A test without a target gets its sanitizer twin NAME[asan] here, the
    per_vm ones in pytest_generate_tests."""
    outcome = yield
    res = outcome.get_result()
    if not (isinstance(res, list) and len(res) == 1 and isinstance(res[0], pytest.Function)):
        return
    item = res[0]
    if not hasattr(item, "callspec") and _wants_asan(collector.config._xb, item, None):
        twin = pytest.Function.from_parent(collector, name=name + "[asan]", callobj=obj,
                                           originalname=name)
        twin.add_marker(pytest.mark.sanitizer)
        outcome.force_result([item, twin])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Before -k and -m select: the suite's tests only, tier markers, the
    sanitizer twins' time limits doubled, and the twins after the plain
    items."""
    xb = config._xb
    out, dropped = [], []
    for item in items:
        suites = item.get_closest_marker("suite")
        if xb.suite not in (suites.args if suites else ("default", "matrix")):
            dropped.append(item)
            continue
        out.append(item)
    default_timeout = config._env_timeout or 120
    for item in out:
        t = _target(item)
        san = item.get_closest_marker("sanitizer") is not None
        item.add_marker("live" if hasattr(item, "callspec") else "offline")
        if t is not None and t.name not in xbtest.DEFAULT_TARGETS:
            item.add_marker("matrix")
        if item.get_closest_marker("alone") and not san:
            item.add_marker("saturated")
        if san:
            m = item.get_closest_marker("timeout")
            item.add_marker(pytest.mark.timeout((m.args[0] if m and m.args else default_timeout) * 2),
                            append=False)
    out.sort(key=lambda i: i.get_closest_marker("sanitizer") is not None)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = out


# ---------------------------------------------------------------------------
# running one test

def _descendants(pid):
    """The pids of every living descendant of PID (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d, "rb") as f:
                    st = f.read()
                ppid = int(st[st.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def _kill_everything(run_dir):
    """Every process the current test started: the tools and VMs xbtest
    tracks, the process groups recorded in the run directory, and any other
    descendant of this process (a Popen of the test's own)."""
    try:
        xbtest._cleanup_children()
    except Exception:  # noqa: BLE001 - the kills below still run
        pass
    xbtest.kill_registered(run_dir)
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _sanitizer_env(item, xb):
    """The environment of one test: the sanitizer pass's build and capture
    path for a twin, and for every test the sanitizer reports of its tools
    written into its own directory."""
    if item.get_closest_marker("sanitizer"):
        os.environ["XB_BUILD_DIR"] = os.path.join(xbtest.ROOT, "build-asan")
        cap = xb.asan_capture or xb.capture
    else:
        cap = xb.capture
    if cap:
        os.environ["EXTROSPECT_CAPTURE"] = cap
    san_dir = os.path.join(xbtest.tmpdir(), "sanitizer")
    os.makedirs(san_dir, exist_ok=True)
    # Tools a test runs as another user (setpriv --reuid=nobody: the
    # privilege tests) write their reports here too: without write access
    # the sanitizer would only print "Can't open file" and exit.
    os.chmod(san_dir, 0o1777)
    parent = os.path.dirname(san_dir)
    os.chmod(parent, os.stat(parent).st_mode | 0o011)
    log = os.path.join(san_dir, "report")
    for var, extra in (("ASAN_OPTIONS", "log_path=%s:abort_on_error=0" % log),
                       ("UBSAN_OPTIONS", "log_path=%s:halt_on_error=1:print_stacktrace=1" % log)):
        cur = os.environ.get(var, "")
        os.environ[var] = (cur + ":" if cur else "") + extra
    os.environ["XB_SAN_DIR"] = san_dir


def _hard_limit(item):
    m = item.get_closest_marker("timeout")
    return (m.args[0] if m and m.args else item.config._env_timeout or 120) + 20


@pytest.fixture(autouse=True)
def _xb_test(request):
    """Around every test: its directory and environment, refusals of items
    that cannot run, and afterwards every process it started killed."""
    item, xb = request.node, request.config._xb
    env, cwd = dict(os.environ), os.getcwd()
    xbtest._current.update(tmp=None, log=[])
    del xbtest._spawned[:]

    def hard_stop():
        sys.__stderr__.write("\nconftest: %s still running %d s after its time limit: its processes "
                             "killed, this process ended\n" % (item.nodeid, 20))
        sys.__stderr__.flush()
        _kill_everything(xb.run_dir)
        os._exit(1)
    watchdog = threading.Timer(_hard_limit(item), hard_stop)
    watchdog.daemon = True
    watchdog.start()
    try:
        _sanitizer_env(item, xb)
        if item.get_closest_marker("saturated") and \
                getattr(request.config, "workerinput", {}).get("workercount", 1) > 1:
            pytest.fail("a saturated test runs with nothing beside it: run it without -n "
                        "(run-all.sh: -m saturated first, alone)", pytrace=False)
        unrunnable = item.get_closest_marker("xb_unrunnable")
        if unrunnable:
            if xb.strict:
                pytest.fail(unrunnable.args[0] + ": no target of this suite runs this test", pytrace=False)
            xbtest.skip(unrunnable.args[0])
        t = _target(item)
        if t is not None and not t.present:
            xbtest.skip_because("target-not-built", t, "%s: %s" % (t.name, t.missing))
        yield
    finally:
        _kill_everything(xb.run_dir)
        watchdog.cancel()
        tmp = xbtest._current["tmp"]
        if tmp and not os.environ.get("XB_KEEP_TMP"):
            shutil.rmtree(tmp, True)
        xbtest._current["tmp"] = None
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Call the test, then the checks every test gets: its background
    tools' stderr and the sanitizer reports (also after a skip)."""
    fn = pyfuncitem.obj
    args = {a: pyfuncitem.funcargs[a] for a in pyfuncitem._fixtureinfo.argnames}
    try:
        fn(**args)
    except pytest.skip.Exception as e:
        try:
            xbtest._post_test_checks()
        except AssertionError as e2:
            raise AssertionError("(after skipping: %s) %s" % (e, e2)) from None
        raise
    xbtest._post_test_checks()
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Strict mode: a skip is a failure unless raised by skip_because for a
    reason acceptable in CI.  Every report carries its target's name."""
    outcome = yield
    rep = outcome.get_result()
    t = _target(item)
    if t is not None:
        rep.user_properties.append(("xb_target", t.name))
    if rep.skipped and item.config._xb.strict:
        exc = call.excinfo.value if call.excinfo else None
        if not (isinstance(exc, xbtest.Skip) and xbtest.skip_ok_in_strict(exc)):
            why = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            rep.outcome = "failed"
            rep.longrepr = "skipped, which --strict-suite does not accept (%s): %s" % (
                "undocumented reason: use xbtest.skip_because()"
                if getattr(exc, "key", None) is None else
                "reason %r is not acceptable in CI" % exc.key, why)


# ---------------------------------------------------------------------------
# the tally (the controller's), the table

def _first_line(rep):
    text = getattr(rep, "longreprtext", "") or str(rep.longrepr or "")
    lines = [l for l in text.splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("E ")]
    return (errs[0][1:].strip() if errs else lines[-1].strip() if lines else "failed")[:300]


class Tally:
    """Each item counted once: failed if any of its phases failed (or its
    module did not import), else skipped if it skipped, else passed."""

    def __init__(self, xb):
        self.xb = xb

    def add(self, report, status):
        xb = self.xb
        prev = xb.status.get(report.nodeid)
        if prev == "failed" or (prev == "skipped" and status == "passed"):
            return
        xb.status[report.nodeid] = status
        if status == "failed":
            xb.why[report.nodeid] = _first_line(report)
        for k, v in getattr(report, "user_properties", ()):
            if k == "xb_target":
                xb.target_of[report.nodeid] = v

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.add(report, "failed")
        elif report.skipped:
            self.add(report, "skipped")
        elif report.when == "call":
            self.add(report, "passed")

    def pytest_collectreport(self, report):
        if report.failed:
            self.add(report, "failed")

    def pytest_terminal_summary(self, terminalreporter, config):
        if config.option.collectonly or not (config.getoption("table") or self.xb.suite == "matrix"):
            return
        rows = [("target", "otp", "flavor", "debug", "pass", "fail", "skip", "")]
        for t in self.xb.targets:
            got = [self.xb.status[n] for n, tn in self.xb.target_of.items() if tn == t.name]
            g = t.guess() if not t.present else t.info
            rows.append((t.name, t.otp_version if t.present else g.get("otp", "?"),
                         g.get("flavor", "?"), g.get("debug", "?"),
                         str(got.count("passed")), str(got.count("failed")), str(got.count("skipped")),
                         "" if t.present else "(%s)" % t.missing))
        widths = [max(len(r[i]) for r in rows) for i in range(7)]
        tw = terminalreporter
        tw.write_sep("-", "results by VM (release x flavour x debug level)")
        for r in rows:
            cells = [r[i].ljust(widths[i]) if i < 4 else r[i].rjust(widths[i]) for i in range(7)]
            tw.write_line("  " + "  ".join(cells) + ("  " + r[7] if r[7] else ""))
