"""xbtest - the acceptance tests' helpers: VM targets, running VMs and our tools.

Tests live in tests/acceptance/test_*.py as module-level functions named
test_*; pytest runs them (tests/conftest.py, tests/README.md).  A test passes
by returning, fails by raising (AssertionError or anything else), and skips
with skip_because(KEY, target) (a documented reason, below).

Targets
    A *target* is an Erlang VM to test against: "stock" (Debian's erlang-base,
    /usr/bin/erl) or a VM built by tests/build-vms.sh under
    $EXTROSPECT_VM_CACHE/vms/NAME/ (default /var/cache/extrospect-beam).  Its
    attributes come from the VM's `info` file: name, otp, otp_version, erts,
    flavor ("jit"|"emu"), debug ("dwarf"|"symtab"|"dynsym"), beam, erl, root,
    and chroot (None, or the root of a container target: see below); the
    whole file is target.info (tests/build-vms.sh lists its keys).

    Targets in BY_NAME_TARGETS run only the tests that name them
    (@per_vm(only=[...])): Debian's own VMs as containers (sid-stock in the
    default suite; trixie-stock, bookworm-stock), the layout-shifted builds
    (otp25-emu-shifted, otp25-jit-shifted; otp27-jit-shifted) and the
    VM-probes builds (otp25-jit-probes; otp27-jit-probes), each with a
    -stripped sibling.

    Container targets (NAME-stock, info chroot=DIR): Debian's erlang-base in
    a debootstrapped root.  VM() starts its /usr/bin/erl in new mount and
    PID namespaces chrooted into DIR (container_argv: unshare --mount --pid
    --fork --kill-child, /proc mounted inside, a private /tmp, the run's and
    the test's directories bind-mounted at their host paths), with the
    workloads compiled by the root's own erlc inside it.  vm.pid is the
    HOST pid of its beam.smp (pid 1 in its namespace: vm.ns_pid), whose
    /proc/PID/exe is inside DIR: point the tools at vm.pid, as one profiles
    a container from the host.  vm.kill() kills the whole namespace.

Markers (thin wrappers over pytest marks, read by tests/conftest.py)
    @per_vm(flavor=None, debug=None, only=None, exclude=None)
        run the test once per target of the suite that matches; the test gets
        the Target as its argument:   def test_x(target): ...
        flavor/debug: a value or a list of values; only/exclude: lists of
        target names.  Undecorated tests run once, with no argument.
    @timeout(SECONDS)
        this test's time limit (pytest-timeout; default 120 s, pytest.ini).
    @no_asan("why"), @asan("why")
        leave the test out of the sanitizer pass / put a test that asks for
        particular VMs into it (tests/README.md).
    @alone("why")
        run with no other test beside it (the `saturated` tier).
    @suite(NAME...)
        run only in these suites (e.g. "package"); others run in default
        and matrix.

Starting a VM
    with VM(target, extra_args=["+JPperf", "map"], schedulers=2) as vm:
        vm.pid                      OS pid of beam.smp (checked via /proc/PID/exe;
                                    a container's: the host pid, vm.ns_pid its own)
        vm.eval("lists:seq(1,3)")   -> "[1,2,3]"  (the value printed with ~p)
        vm.eval_raw("xb_inspect:functions()")  -> bytes (value must be iodata)
        vm.start_workload("xb_split", 80)  == vm.eval("xb_split:start(80)")
        vm.kill()                   SIGKILL the VM (process group)
    The workload modules tests/workloads/*.erl are compiled once per run and
    target, with that VM's own erlc, and put on the code path (-pa).  The VM is
    always killed: on leaving the with-block, at exit, and after every test
    (its process group is recorded in the run directory).

Running our tools
    r = run_tool("erlang-write-perf-map", "-o", path, str(vm.pid), timeout=30)
    r.rc, r.out (str), r.err (str), r.elapsed (s), r.lines_err
    tool_path(name) -> build/NAME ($XB_BUILD_DIR overrides build/)

Other helpers: tmpdir() (a fresh directory for the current test, removed
afterwards), check(cond, msg, detail=None), wait_for(pred, timeout, step),
read_info(dir), all_targets(), elf_debug_kind(path), log(msg) (printed: pytest
shows it with the test's output).

Skipping
    A test may skip only for a documented reason that applies to the target
    it runs on:  skip_because("stripped-otp29", target, "detail").  The keys
    are SKIP_REASONS below (tests/README.md lists them); a key whose
    condition does not hold for the target is a test error (FAIL).  The old
    skip("why") still works, but the strict mode (run-all.sh) reports such an
    undocumented skip as a failure, and also a documented one whose entry
    says it is not acceptable in CI (e.g. a missing package: run-all.sh
    installs them).

Checks every test gets for free (tests/conftest.py calls them)
    - the binaries are current: tool_path() refuses a build directory in which
      ninja still has work (a failed build leaves old binaries behind);
    - sanitizer reports: ASAN_OPTIONS/UBSAN_OPTIONS log_path points into the
      test's own directory; any report written there by ANY of our tools, in
      the foreground (run_tool) or the background (spawn_tool), fails the test;
    - every `erlang-sample -v` statistics line seen (run_tool's stderr, and the
      stderr of spawn_tool'ed tools, piped or written to a file) must account
      for every sample: received - processed == the sum of the drop counters,
      and the "innermost Erlang function only" note is printed iff those
      samples exceed 10 % of the processed ones (check_sample_stats()).
    - time_scale(): 1, or 3 under the sanitizer build (XB_TIME_SCALE
      overrides): multiply wall-clock limits by it.
"""

import atexit
import base64
import errno
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    import pytest
except ImportError:  # bench/ uses the VM helpers without pytest
    pytest = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKLOADS = os.path.join(ROOT, "tests", "workloads")
CACHE = os.environ.get("EXTROSPECT_VM_CACHE", "/var/cache/extrospect-beam")
VMS_DIR = os.path.join(CACHE, "vms")
STOCK_ERL = "/usr/bin/erl"
STOCK_ROOT = "/usr/lib/erlang"

# Targets a test runs on only when it names them (@per_vm(only=[...])), in
# every suite: Debian's own VMs run as containers (NAME-stock: a
# debootstrapped root, tests/build-vms.sh), the layout-shifted builds
# (members inserted into struct process and ErtsSchedulerData_, an erts
# version no release table names) and the VM-probes builds (USE_VM_PROBES:
# struct process 16 bytes longer, the erts version unchanged), and their
# stripped siblings.  Their info files say what each is (chroot=; variant=,
# unshifted=, shifted=, probes=, moved=: see tests/build-vms.sh).
BY_NAME_TARGETS = ["sid-stock", "trixie-stock", "bookworm-stock",
                   "otp25-emu-shifted", "otp25-jit-shifted", "otp25-jit-probes",
                   "otp25-emu-shifted-stripped", "otp25-jit-shifted-stripped",
                   "otp25-jit-probes-stripped",
                   "otp27-jit-shifted", "otp27-jit-shifted-stripped",
                   "otp27-jit-probes", "otp27-jit-probes-stripped"]
# What `tests/build-vms.sh default` builds (plus stock) that the default suite
# runs: the generic per-VM tests on the first three, the by-name targets for
# the tests that name them.
DEFAULT_TARGETS = ["stock", "otp25-emu-dwarf", "otp25-jit-dwarf",
                   "sid-stock", "otp25-emu-shifted", "otp25-jit-shifted", "otp25-jit-probes",
                   "otp25-emu-shifted-stripped", "otp25-jit-shifted-stripped",
                   "otp25-jit-probes-stripped"]
# What `tests/build-vms.sh matrix` builds (plus stock).  It also builds a VM
# otpX.Y.Z-jit for each other erlang release Debian ships whose source can be
# downloaded (which ones moves with Debian): all_targets() adds every built VM.
MATRIX_TARGETS = ["stock", "otp25-emu-dwarf", "otp25-jit-dwarf", "otp27-jit", "otp29-jit",
                  "otp25-emu-dwarf-stripped", "otp25-jit-dwarf-stripped",
                  "otp27-jit-stripped", "otp29-jit-stripped"] + BY_NAME_TARGETS


class Skip(pytest.skip.Exception if pytest else Exception):
    """Raised to skip a test (pytest reports it as skipped, with the message).
    `key` is the SKIP_REASONS entry it was raised for (None: undocumented)."""

    def __init__(self, msg, key=None):
        if pytest:  # reported at the test's line, not this module's
            super().__init__(msg, _use_item_location=True)
        else:
            super().__init__(msg)
        self.key = key


def skip(reason):
    """Undocumented skip: allowed in a plain pytest run, a failure in the
    strict mode (run-all.sh)."""
    raise Skip(reason)


def _otp_major(t):
    try:
        return int(str(t.otp).split(".")[0])
    except (ValueError, AttributeError):
        return 0


# Documented reasons to skip: key -> (what it means, applies(target or
# None), acceptable in strict mode (CI)).  Keep tests/README.md in step.
SKIP_REASONS = {
    "stripped-otp29": (
        "a stripped OTP >= 29 beam names none of its internal functions (only its API is "
        "exported), so a test about a named internal C function has nothing to look for",
        lambda t: t is not None and t.present and t.debug == "dynsym" and _otp_major(t) >= 29,
        True),
    "jit-only": (
        "the test needs a JIT VM (a +JP option, JIT code) and the target is the interpreter",
        lambda t: t is not None and t.present and t.flavor == "emu",
        True),
    "target-not-built": (
        "the VM target is not built (tests/build-vms.sh); run-all.sh builds the suite's VMs",
        lambda t: t is not None and not t.present,
        False),
    "needs-package": (
        "a Debian package the test needs is not installed (run-all.sh installs them all)",
        lambda t: True,
        False),
    "needs-root": (
        "the test needs root (CI runs as root)",
        lambda t: os.geteuid() != 0,
        False),
    "no-bpf": (
        "the kernel refuses the BPF capture program (no CAP_BPF, a kernel older than 5.8, "
        "lockdown); the perf path's half of the test ran (CI's kernel loads it)",
        lambda t: bpf_refused() is not None,
        False),
}


_BPF_REFUSED = []


def bpf_refused():
    """Why this machine refuses the BPF capture program, or None when it
    loads (tests/tools/bpf_capture_check --open-only; asked once)."""
    if not _BPF_REFUSED:
        tool = os.path.join(build_dir(), "tests", "tools", "bpf_capture_check")
        try:
            r = subprocess.run([tool, "--open-only", "1"], capture_output=True, text=True, timeout=30)
            why = None if r.returncode == 0 else (r.stderr.strip() or "exit %d" % r.returncode)
        except OSError as e:
            why = str(e)
        _BPF_REFUSED.append(why)
    return _BPF_REFUSED[0]


def skip_because(key, target=None, detail=""):
    """Skip for a documented reason (SKIP_REASONS) that must apply to target."""
    if key not in SKIP_REASONS:
        raise AssertionError("skip_because(%r): not a documented skip reason (%s)"
                             % (key, ", ".join(sorted(SKIP_REASONS))))
    what, applies, _ = SKIP_REASONS[key]
    if not applies(target):
        raise AssertionError("test wanted to skip as %r (%s), which does not apply to %r%s"
                             % (key, what, target, ": " + detail if detail else ""))
    raise Skip("[%s] %s" % (key, detail or what), key)


def skip_ok_in_strict(exc):
    """Is this Skip acceptable in the strict mode (pytest --strict-suite)?"""
    key = getattr(exc, "key", None)
    return key in SKIP_REASONS and SKIP_REASONS[key][2]


def untraced_leak_check():
    """LeakSanitizer refuses to run under ptrace (strace): the environment
    for a traced sanitizer build, leak checking off (the rest of ASan on)."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    return env


def time_scale():
    """Factor for wall-clock limits: 3 under the sanitizer build (ASan makes
    our tools 2-3x slower), 1 otherwise; XB_TIME_SCALE overrides."""
    v = os.environ.get("XB_TIME_SCALE")
    if v:
        return float(v)
    return 3.0 if sanitized() else 1.0


# ---------------------------------------------------------------------------
# decorators

def _mark(fn, name, *args, **kwargs):
    """fn with pytest mark NAME (when pytest is there: bench/ imports this
    module without it)."""
    return getattr(pytest.mark, name)(*args, **kwargs)(fn) if pytest is not None else fn


def per_vm(flavor=None, debug=None, only=None, exclude=None):
    """Run the test once per target of the suite that matches (pytest mark
    per_vm; tests/conftest.py parametrises the test's `target` argument)."""
    return lambda fn: _mark(fn, "per_vm", flavor=flavor, debug=debug, only=only, exclude=exclude)


def timeout(seconds):
    """This test's time limit (pytest-timeout's mark; doubled in the
    sanitizer pass)."""
    return lambda fn: _mark(fn, "timeout", seconds)


def no_asan(reason):
    """Leave this test out of the sanitizer pass, for a reason that says why
    the sanitizers could see nothing there (it runs none of our tools, or
    runs them from build/ through a script), or why the pass need not run it
    (timing or counting semantics whose code paths other sanitized tests
    run)."""
    return lambda fn: _mark(fn, "no_asan", reason)


def asan(reason):
    """Run this test in the default suite's sanitizer pass although it asks
    for particular VMs: REASON names the paths no other sanitized test
    runs (bad input, refusals, racy exits, discovery in stripped builds...).
    Without it the pass runs every test without a VM and every test that
    asks for none (on the flavour the plain pass did not use); with
    --asan-all it runs every test."""
    return lambda fn: _mark(fn, "asan", reason)


def alone(reason):
    """Run this test with no other test beside it (the `saturated` tier:
    run-all.sh runs those first, one at a time): REASON says what a
    neighbour would change (a saturated machine it makes or needs idle, a
    latency it measures, real-time witnesses a neighbour's SCHED_FIFO
    threads would preempt)."""
    return lambda fn: _mark(fn, "alone", reason)


def suite(*names):
    """Run this test only in the suites named (pytest --suite NAME); tests
    without it run in the default and matrix suites."""
    return lambda fn: _mark(fn, "suite", *names)


def _as_list(v):
    if v is None:
        return None
    return [v] if isinstance(v, str) else list(v)


def target_matches(target, spec):
    fl, dbg = _as_list(spec.get("flavor")), _as_list(spec.get("debug"))
    only, excl = _as_list(spec.get("only")), _as_list(spec.get("exclude"))
    if only is not None and target.name not in only:
        return False
    if target.name in BY_NAME_TARGETS and only is None:
        return False
    if excl is not None and target.name in excl:
        return False
    # A target that is not built has unknown attributes: it matches on name
    # patterns so it can be reported as SKIP (not built).
    if not target.present:
        guess = target.guess()
        if fl is not None and guess.get("flavor") not in fl:
            return False
        if dbg is not None and guess.get("debug") not in dbg:
            return False
        return True
    if fl is not None and target.flavor not in fl:
        return False
    if dbg is not None and target.debug not in dbg:
        return False
    return True


# ---------------------------------------------------------------------------
# targets

def read_info(d):
    info = {}
    with open(os.path.join(d, "info")) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                info[k] = v
    return info


def elf_sections(path):
    """Section names and dynamic symbol names of an ELF64 file (little endian)."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("%s: not an ELF64 file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        secs.append(struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize))
    strtab = secs[shstrndx]
    def cstr(off):
        end = data.index(b"\0", off)
        return data[off:end].decode("latin-1")
    names = {}
    for s in secs:
        names[cstr(strtab[4] + s[0])] = s
    dynsyms = set()
    if ".dynsym" in names and ".dynstr" in names:
        ds, dstr = names[".dynsym"], names[".dynstr"]
        for off in range(ds[4], ds[4] + ds[5], 24):
            nm, = struct.unpack_from("<I", data, off)
            if nm:
                dynsyms.add(cstr(dstr[4] + nm))
    return set(names), dynsyms


def elf_debug_kind(path):
    secs, _ = elf_sections(path)
    if ".debug_info" in secs:
        return "dwarf"
    if ".symtab" in secs:
        return "symtab"
    return "dynsym"


class Target:
    def __init__(self, name, info=None, missing=None):
        self.name = name
        self.info = info or {}
        self.missing = missing
        self.present = missing is None
        for k in ("otp", "otp_version", "erts", "flavor", "debug", "beam", "erl", "root"):
            setattr(self, k, self.info.get(k, "?"))
        # a container VM: the root it runs chrooted into (beam, erl, root are
        # host paths inside it)
        self.chroot = self.info.get("chroot") or None

    @property
    def container(self):
        return self.chroot is not None

    def in_root(self, path):
        """PATH (a host path inside the container's root) as the container
        sees it; other targets: PATH."""
        if not self.container:
            return path
        root = self.chroot.rstrip("/")
        if path != root and not path.startswith(root + "/"):
            raise ValueError("%s: %s is not inside its root %s" % (self.name, path, root))
        return path[len(root):] or "/"

    @property
    def bindir(self):
        return os.path.dirname(self.erl)

    @property
    def erlc(self):
        """The target's erlc (a host path; a container's runs only inside
        it: container_argv)."""
        for c in (os.path.join(self.bindir, "erlc"), os.path.join(self.root, "bin", "erlc")):
            if os.access(c, os.X_OK):
                return c
        raise RuntimeError("%s: no erlc next to %s" % (self.name, self.erl))

    @property
    def jit(self):
        return self.flavor == "jit"

    def guess(self):
        """Attributes of a target that is not built, from its name."""
        g = dict(self.info)
        m = re.match(r"otp(\d+)(?:\.[\d.]+)?-(jit|emu)", self.name)
        if m:
            g.setdefault("otp", m.group(1))
            g.setdefault("flavor", m.group(2))
        if self.name.endswith("-stock"):   # Debian's erlang-base: JIT, stripped
            g.setdefault("flavor", "jit")
            g.setdefault("debug", "dynsym")
        if self.name.endswith("-stripped"):
            g.setdefault("debug", "dynsym")
        elif self.name.startswith("otp"):
            g.setdefault("debug", "dwarf")
        return g

    def __repr__(self):
        return "Target(%s: OTP %s %s %s)" % (self.name, self.otp_version, self.flavor, self.debug)


def stock_target():
    if not os.access(STOCK_ERL, os.X_OK):
        return Target("stock", {"flavor": "jit", "debug": "dynsym", "otp": "25"},
                      missing="Debian's erlang-base is not installed (%s missing)" % STOCK_ERL)
    erts_dirs = sorted(d for d in os.listdir(STOCK_ROOT) if d.startswith("erts-"))
    if not erts_dirs:
        return Target("stock", missing="no erts-* directory in " + STOCK_ROOT)
    erts = erts_dirs[-1][len("erts-"):]
    beam = os.path.join(STOCK_ROOT, erts_dirs[-1], "bin", "beam.smp")
    otp, otp_version = "?", "?"
    rel = os.path.join(STOCK_ROOT, "releases")
    for r in sorted(os.listdir(rel)) if os.path.isdir(rel) else []:
        p = os.path.join(rel, r, "OTP_VERSION")
        if os.path.exists(p):
            otp = r
            with open(p) as f:
                otp_version = f.read().strip()
    try:
        secs, dyn = elf_sections(beam)
        debug = "dwarf" if ".debug_info" in secs else "symtab" if ".symtab" in secs else "dynsym"
        flavor = "jit" if "__jit_debug_descriptor" in dyn else "emu"
    except (OSError, ValueError) as e:
        return Target("stock", missing="cannot read %s: %s" % (beam, e))
    return Target("stock", dict(name="stock", otp=otp, otp_version=otp_version, erts=erts,
                                flavor=flavor, debug=debug, beam=beam, erl=STOCK_ERL,
                                root=STOCK_ROOT))


def load_target(name):
    if name == "stock":
        return stock_target()
    d = os.path.join(VMS_DIR, name)
    if not os.path.exists(os.path.join(d, "info")):
        mode = "default" if name in DEFAULT_TARGETS else "matrix"
        return Target(name, missing="not built: run tests/build-vms.sh %s" % mode)
    info = read_info(d)
    if not os.access(info.get("erl", ""), os.X_OK):
        return Target(name, info, missing="%s: erl %s not executable" % (name, info.get("erl")))
    return Target(name, info)


def all_targets():
    names = list(MATRIX_TARGETS)
    if os.path.isdir(VMS_DIR):
        for n in sorted(os.listdir(VMS_DIR)):
            if n not in names and os.path.exists(os.path.join(VMS_DIR, n, "info")):
                names.append(n)
    return names


def derived_target(base, tag, erts_version=None, beam_transform=None):
    """A copy of target BASE's OTP installation, changed: its erts directory
    renamed to erts-ERTS_VERSION (a release the tools have no table for),
    and/or its beam.smp replaced by beam_transform(src, dst) (e.g. objcopy
    --strip-debug: a .symtab-only beam).  bin/, erts-*/ and releases/ are
    copied (and erl's ROOTDIR pointed at the copy), lib/ and usr/ linked.
    Built once per run (run directory); returns a Target named BASE-TAG."""
    if not base.present:
        skip_because("target-not-built", base, base.missing)
    name = "%s-%s" % (base.name, tag)
    root = os.path.join(run_dir(), "derived", name)
    old_erts = "erts-" + base.erts
    new_vsn = erts_version or base.erts
    new_erts = "erts-" + new_vsn
    beam = os.path.join(root, new_erts, "bin", os.path.basename(base.beam))
    done = os.path.join(root, ".done")
    if not os.path.exists(done):
        shutil.rmtree(root, True)
        os.makedirs(root)
        for d in os.listdir(base.root):
            src = os.path.join(base.root, d)
            if d in ("bin", old_erts, "releases"):
                shutil.copytree(src, os.path.join(root, new_erts if d == old_erts else d),
                                symlinks=True)
            elif os.path.isdir(src):
                os.symlink(src, os.path.join(root, d))
        for rel in ("bin/erl", "%s/bin/erl" % new_erts, "bin/start", "%s/bin/start" % new_erts):
            p = os.path.join(root, rel)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p) as f:
                    text = f.read()
                text = re.sub(r'(?m)^(\s*)ROOTDIR=.*$',
                              lambda m: '%sROOTDIR="%s"' % (m.group(1), root), text)
                text = text.replace(old_erts, new_erts)
                with open(p, "w") as f:
                    f.write(text)
        sed = os.path.join(root, "releases", "start_erl.data")
        if os.path.exists(sed) and erts_version:
            with open(sed) as f:
                data = f.read()
            with open(sed, "w") as f:
                f.write(data.replace(base.erts, new_vsn))
        if beam_transform:
            tmp = beam + ".orig"
            os.rename(beam, tmp)
            beam_transform(tmp, beam)
            os.unlink(tmp)
            os.chmod(beam, 0o755)
        with open(done, "w") as f:
            f.write("ok\n")
    info = dict(base.info, name=name, erts=new_vsn, root=root,
                erl=os.path.join(root, "bin", "erl"), beam=beam, debug=elf_debug_kind(beam))
    return Target(name, info)


# ---------------------------------------------------------------------------
# per-test context (reset by tests/conftest.py before each test)

_current = {"tmp": None, "log": [], "runner": False}


def tmpdir():
    """A fresh directory for the current test (removed after the test unless
    XB_KEEP_TMP is set; outside pytest it goes at exit)."""
    if _current["tmp"] is None:
        _current["tmp"] = tempfile.mkdtemp(prefix="xbtest-")
        if not _current.get("runner"):
            atexit.register(shutil.rmtree, _current["tmp"], True)
    return _current["tmp"]


def log(msg):
    """A line about the test's run (a measurement, what it saw): printed,
    which pytest shows with the test's output (-rP for passing tests)."""
    _current["log"].append(str(msg))
    print(msg, flush=True)


def run_dir():
    """Directory shared by the tests of one run (of one pytest-xdist
    worker): compiled workloads, derived targets, process groups to kill."""
    d = os.environ.get("XB_RUN_DIR")
    if not d:
        d = tempfile.mkdtemp(prefix="xbrun-")
        os.environ["XB_RUN_DIR"] = d
        atexit.register(shutil.rmtree, d, True)
    return d


def check(cond, msg, detail=None):
    if not cond:
        if detail:
            raise AssertionError("%s\n%s" % (msg, detail))
        raise AssertionError(msg)


def wait_for(pred, timeout=10.0, step=0.05):
    """Poll pred() until it returns a true value (returned) or timeout (None)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(step)


# ---------------------------------------------------------------------------
# our binaries

def build_dir():
    return os.environ.get("XB_BUILD_DIR", os.path.join(ROOT, "build"))


def sanitized():
    """Are our tools the ASan/UBSan build (XB_BUILD_DIR=build-asan)?"""
    d = build_dir()
    if os.path.basename(os.path.normpath(d)) == "build-asan":
        return True
    try:
        import json
        with open(os.path.join(d, "meson-info", "intro-buildoptions.json")) as f:
            opts = json.load(f)
        return any(o.get("name") == "b_sanitize" and o.get("value") not in ("none", "", None)
                   for o in opts)
    except (OSError, ValueError):
        return False


# What ./build.sh must produce (its OUTPUTS list).
BUILD_OUTPUTS = ["erlang-sample", "erlang-write-perf-map", "erlang-heapsample", "xb-gen-release", "events_only",
                 "format_bench", "maps_bench", "tests/unit/test_unit", "tests/tools/bpf_capture_check",
                 "tests/tools/xb-format-writer"]
_build_ok = {}


def build_problem(d=None):
    """None if build directory d (default build_dir()) is current, else one
    line saying what is wrong and how to fix it.  Current means: every
    BUILD_OUTPUTS binary exists and `ninja -n` has nothing to do (ninja's own
    dependency tracking, headers included).  Without ninja: no binary older
    than the newest file of src/, include/, meson.build."""
    d = d or build_dir()
    if d in _build_ok:
        return _build_ok[d]
    fix = "run %s./build.sh" % ("XB_SANITIZE=1 " if os.path.basename(d) == "build-asan" else "")
    problem = None
    missing = [o for o in BUILD_OUTPUTS if not os.access(os.path.join(d, o), os.X_OK)]
    if missing:
        problem = "%s not built (%s missing): %s" % (d, ", ".join(missing), fix)
    elif shutil.which("ninja") and os.path.exists(os.path.join(d, "build.ninja")):
        p = subprocess.run(["ninja", "-C", d, "-n"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        todo = [l for l in p.stdout.splitlines() if l.startswith("[")]
        if p.returncode != 0 or todo:
            problem = ("%s is stale (binaries older than their sources; ninja would run: %s): %s"
                       % (d, (todo[0] if todo else p.stdout.strip()[-200:]), fix))
    else:
        srcs = []
        for top in ("src", "include", "meson.build"):
            base = os.path.join(ROOT, top)
            if os.path.isfile(base):
                srcs.append(base)
            for dp, _, fs in os.walk(base):
                srcs += [os.path.join(dp, f) for f in fs]
        newest = max(srcs, key=lambda f: os.stat(f).st_mtime) if srcs else None
        if newest:
            t = os.stat(newest).st_mtime
            old = [o for o in BUILD_OUTPUTS[:2] if os.stat(os.path.join(d, o)).st_mtime < t]
            if old:
                problem = "%s is stale (%s older than %s): %s" % (
                    d, ", ".join(old), os.path.relpath(newest, ROOT), fix)
    _build_ok[d] = problem
    return problem


def tool_path(name):
    p = os.path.join(build_dir(), name)
    if not os.access(p, os.X_OK):
        raise AssertionError("%s not built (run ./build.sh)" % p)
    problem = build_problem()
    if problem:
        raise AssertionError(problem)
    return p


def nobody_copy(name):
    """A copy of our tool NAME that user nobody can run (the build directory
    may sit under a directory only root can enter, e.g. /root), in the
    test's directory."""
    d = os.path.join(tmpdir(), "nobody-bin")
    os.makedirs(d, exist_ok=True)
    for p in (tmpdir(), d):  # mkdtemp makes 0700 directories
        os.chmod(p, 0o755)
    dst = os.path.join(d, name)
    shutil.copy2(tool_path(name), dst)
    os.chmod(dst, 0o755)
    return dst


class Result:
    def __init__(self, argv, rc, out, err, elapsed, timed_out):
        self.argv, self.rc, self.elapsed, self.timed_out = argv, rc, elapsed, timed_out
        self.out_bytes, self.err_bytes = out, err
        self.out = out.decode("utf-8", "replace")
        self.err = err.decode("utf-8", "replace")

    @property
    def lines_err(self):
        return self.err.splitlines()

    def describe(self):
        s = "$ %s\nexit %s%s after %.2fs" % (" ".join(self.argv), self.rc,
                                             " (TIMED OUT)" if self.timed_out else "",
                                             self.elapsed)
        if self.err:
            s += "\nstderr: " + self.err.rstrip()[-2000:]
        return s


def run_cmd(argv, timeout=60, env=None, stdin=subprocess.DEVNULL):
    """Run argv; kill it (process group) after timeout.  Returns Result."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, start_new_session=True)
    _track(p)
    timed_out = False
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _killpg(p.pid)
        out, err = p.communicate()
    finally:
        _untrack(p)
    return Result(list(argv), p.returncode, out, err, time.monotonic() - t0, timed_out)


# Text that means a sanitizer (XB_BUILD_DIR=build-asan) or an assertion fired.
SANITIZER_TEXT = ("runtime error:", "Sanitizer", "AddressSanitizer", "LeakSanitizer",
                  "Assertion")


def sanitizer_log_dir():
    """Where this test's sanitizer reports go (tests/conftest.py sets ASAN_OPTIONS and
    UBSAN_OPTIONS log_path into it for the test's process); None outside."""
    return os.environ.get("XB_SAN_DIR")


def sanitizer_reports():
    """[(file, first lines)] of sanitizer reports written so far by this test's tools."""
    d = sanitizer_log_dir()
    out = []
    if d and os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            try:
                with open(os.path.join(d, f), errors="replace") as fh:
                    text = fh.read()
            except OSError:
                continue
            if text.strip():
                out.append((f, text))
    return out


def check_no_sanitizer_reports(what):
    reps = sanitizer_reports()
    if reps:
        f, text = reps[0]
        lines = [l for l in text.splitlines() if l.strip()]
        head = next((l for l in lines if any(t in l for t in SANITIZER_TEXT)), lines[0])
        raise AssertionError("%s: sanitizer report (%s): %s\n%s" % (
            what, f, head[:300], "\n".join(lines[:40])))


# erlang-sample -v: "...: 2.00 s; received R, processed P; dropped: truncated unwind A,
# failed validation B, process moved on C, too stale D, no registers E; lost ...;
# innermost Erlang function only K (heap moved ..., process switched out ...); ..."
STATS_RE = re.compile(r"received (\d+), processed (\d+); dropped: (.*?); lost (\d+)")
DROP_RE = re.compile(r"([a-z][a-z ]*?) (\d+)(?:,|$)")
PARTIAL_RE = re.compile(r"innermost Erlang function only (\d+)")
PARTIAL_NOTE = "of the samples name only their innermost Erlang function"


def sample_stats(err):
    """The counters of erlang-sample -v's statistics line in stderr text, as a
    dict (received, processed, lost, partial, and every 'dropped:' counter by
    name, e.g. 'too stale'), or None when there is no such line."""
    m = None
    for m in STATS_RE.finditer(err):
        pass
    if not m:
        return None
    st = {"received": int(m.group(1)), "processed": int(m.group(2)), "lost": int(m.group(4))}
    drops = {}
    for name, n in DROP_RE.findall(m.group(3)):
        drops[name.strip()] = int(n)
    st["drops"] = drops
    line_end = err.find("\n", m.end())
    rest = err[m.end():line_end if line_end >= 0 else len(err)]
    pm = PARTIAL_RE.search(rest)
    st["partial"] = int(pm.group(1)) if pm else None
    for k in ("lost", "throttled", "rings enlarged", "code map refreshes",
              "stack copy exhausted", "module changes since attaching", "no live read"):
        mm = re.search(re.escape(k) + r" (\d+)", rest)
        if mm:
            st[k] = int(mm.group(1))
    return st


# The drop reasons the README names: the -v line must have them (any other
# counter listed after "dropped:" is added to the sum as well).
DROP_COUNTERS = ("truncated unwind", "failed validation", "process moved on", "too stale",
                 "no registers")


def check_sample_stats(err, what="erlang-sample -v"):
    """Every dropped sample is counted: received - processed == the sum of
    the drop counters; and the note about samples that name only their
    innermost Erlang function is printed iff they are more than 10 % of the
    processed samples.  Returns the stats (None when err has no such line)."""
    st = sample_stats(err)
    if st is None:
        return None
    drops = st["drops"]
    # Every counter listed after "dropped:" counts (a new drop reason the
    # tool adds there is summed too); the ones the README names must be there.
    missing = [k for k in DROP_COUNTERS if k not in drops]
    check(not missing, "%s: the -v line lacks the drop counters %s" % (what, missing),
          err[-1500:])
    total = sum(drops.values())
    check(st["received"] - st["processed"] == total,
          "%s: received %d - processed %d = %d samples, but the drop counters add up to %d (%s)"
          % (what, st["received"], st["processed"], st["received"] - st["processed"], total,
             ", ".join("%s %d" % kv for kv in sorted(drops.items()))), err[-1500:])
    check(st["processed"] <= st["received"], "%s: processed > received" % what, err[-1500:])
    if st["partial"] is not None:
        noted = PARTIAL_NOTE in err
        over = st["processed"] > 0 and st["partial"] * 10 > st["processed"]
        check(noted == over,
              "%s: %d of %d processed samples name only their innermost Erlang function (%s "
              "10 %%), but the note is %s" % (what, st["partial"], st["processed"],
                                              "over" if over else "not over",
                                              "printed" if noted else "missing"), err[-1500:])
    return st


# erlang-sample modes that sample and end with the -v statistics line
NO_STATS_MODES = ("--check", "--help", "--version", "--symbolize", "--dump", "--live", "-h", "--write-layout")


def _post_run_checks(name, argv, err, what=None, rc=None):
    """Checks of one finished run of our tool NAME (stderr text err, exit
    status rc when known): the -v statistics line is checked, and a run
    with -v that sampled and succeeded must have printed it (else the
    check would pass on nothing)."""
    if name == "erlang-sample" or os.path.basename(str(name)) == "erlang-sample":
        what = what or "erlang-sample %s" % " ".join(map(str, argv[1:]))
        st = check_sample_stats(err, what)
        args = [str(a) for a in argv[1:]]
        verbose = any(re.fullmatch(r"-v+", a) or a == "--verbose" for a in args)
        sampled = bool(args) and args[-1].isdigit()  # a PID last: it attached (-v alone: the version)
        if st is None and verbose and sampled and rc == 0 and not any(a in NO_STATS_MODES for a in args):
            check(False, "%s: ran with -v and exit 0, but printed no statistics line" % what, err[-1500:])


def run_tool(name, *args, timeout=60, env=None, sanitizer_ok=False):
    """Run one of our binaries.  A sanitizer or assertion report (on its
    stderr or in the sanitizer log directory) fails the test right here
    (unless sanitizer_ok); an erlang-sample -v statistics line is checked
    with check_sample_stats()."""
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    r = run_cmd([tool_path(name)] + [str(a) for a in args], timeout=timeout, env=full_env)
    if not sanitizer_ok:
        bad = [l for l in r.lines_err if any(t in l for t in SANITIZER_TEXT)]
        if bad:
            raise AssertionError("%s: sanitizer/assertion report: %s\n%s"
                                 % (name, bad[0][:300], r.describe()))
        check_no_sanitizer_reports("%s %s" % (name, " ".join(str(a) for a in args)))
    _post_run_checks(name, r.argv, r.err, rc=r.rc)
    return r


# Background tools: (name, argv, stderr file) checked after the test.
_spawned = []


def _tee_stderr(p, path):
    """Replace p.stderr (a pipe) by a pipe fed by a thread that also writes
    everything to path, so the test reads it as before and the harness can
    check it afterwards."""
    real = p.stderr
    rfd, wfd = os.pipe()
    logf = open(path, "wb")

    def pump():
        try:
            while True:
                b = os.read(real.fileno(), 65536)
                if not b:
                    break
                logf.write(b)
                logf.flush()
                view = memoryview(b)
                while view:
                    try:
                        n = os.write(wfd, view)
                    except OSError:  # the test closed its end: keep logging
                        n = len(view)
                    view = view[n:]
        finally:
            logf.close()
            try:
                os.close(wfd)
            except OSError:
                pass
            real.close()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    p.stderr = os.fdopen(rfd, "rb")
    return t


def spawn_tool(name, *args, env=None, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """Start a tool in the background (killed at exit if still running).
    Its stderr (a pipe, or a file the test passed) is checked after the test
    like run_tool's: sanitizer reports, erlang-sample -v statistics."""
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    argv = [tool_path(name)] + [str(a) for a in args]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=stdout, stderr=stderr, env=full_env, start_new_session=True)
    _track(p)
    errpath = None
    if stderr == subprocess.PIPE:
        errpath = os.path.join(tmpdir(), "spawn-%d.stderr" % p.pid)
        p._xb_tee = _tee_stderr(p, errpath)
    elif hasattr(stderr, "name") and isinstance(stderr.name, str):
        errpath = stderr.name
    _spawned.append((name, argv, errpath, p))
    return p


def _post_test_checks():
    """Run by tests/conftest.py after a test function returned (or skipped): background tools'
    stderr (sanitizer text, statistics) and the sanitizer log directory."""
    for name, argv, errpath, p in list(_spawned):
        tee = getattr(p, "_xb_tee", None)
        if tee is not None and p.poll() is not None:
            tee.join(5)
        if not errpath:
            continue
        try:
            with open(errpath, "rb") as f:
                err = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        what = "background %s %s" % (name, " ".join(argv[1:]))
        bad = [l for l in err.splitlines() if any(t in l for t in SANITIZER_TEXT)]
        check(not bad, "%s: sanitizer/assertion report: %s" % (what, bad[0][:300] if bad else ""),
              err[-3000:])
        _post_run_checks(name, argv, err, what, rc=p.poll())
    del _spawned[:]
    check_no_sanitizer_reports("a tool run by this test")


_children = set()


def _pgid_file(pid):
    d = os.path.join(run_dir(), "pgids")
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, str(pid))


def _track(p, what="tool"):
    """Remember p (started with start_new_session): killed at exit, and by
    tests/conftest.py after the test even if this process was killed."""
    _children.add(p)
    with open(_pgid_file(p.pid), "w") as f:
        f.write(what)


def _untrack(p):
    _children.discard(p)
    try:
        os.unlink(_pgid_file(p.pid))
    except OSError:
        pass


def _killpg(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _cleanup_children():
    for p in list(_children):
        if p.poll() is None:
            _killpg(p.pid)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        _untrack(p)
    for vm in list(_live_vms):
        vm.kill()


atexit.register(_cleanup_children)


def _group_is_ours(pgid, run_directory):
    """Does a process of group PGID still carry this run's XB_RUN_DIR in its
    environment?  PIDs wrap (pid_max 32768 here): a recorded group whose
    processes are gone may be someone else's by now -- another run's
    (pytest-xdist's other worker), or the machine's."""
    mark = ("XB_RUN_DIR=%s" % run_directory).encode() + b"\0"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid, "rb") as f:
                st = f.read()
            if int(st[st.rindex(b")") + 2:].split()[2]) != pgid:
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                if mark in f.read():
                    return True
        except (OSError, ValueError, IndexError):
            continue
    return False


def kill_registered(run_directory):
    """Kill every VM process group recorded in run_directory (tests/conftest.py: after each test)
    that is still ours."""
    d = os.path.join(run_directory, "pgids")
    if not os.path.isdir(d):
        return 0
    n = 0
    for f in os.listdir(d):
        try:
            pgid = int(f)
        except ValueError:
            continue
        try:
            if _group_is_ours(pgid, run_directory):
                os.killpg(pgid, signal.SIGKILL)
                n += 1
        except OSError:
            pass
        try:
            os.unlink(os.path.join(d, f))
        except OSError:
            pass
    return n


# ---------------------------------------------------------------------------
# containers

# sh script run by container_argv between unshare and chroot: $1 the root,
# $2 the working directory inside, then host directories to bind-mount at
# the same path inside, "--", the command.
_CONTAINER_SH = r"""
root=$1 cwd=$2
shift 2
mount -t tmpfs -o mode=1777 xb-tmp "$root/tmp" || exit 125
while [ "$1" != -- ]; do
    mkdir -p "$root$1" && mount --bind "$1" "$root$1" || exit 125
    shift
done
shift
exec chroot "$root" /usr/bin/env -C "$cwd" "$@"
"""


def container_binds():
    """Host directories a container target sees at the same path: the run's
    directory (the compiled workloads) and the current test's directory."""
    dirs = []
    for d in (run_dir(), tmpdir()):
        d = os.path.realpath(d)
        if not any(d == o or d.startswith(o + "/") for o in dirs):
            dirs = [o for o in dirs if not o.startswith(d + "/")] + [d]
    return dirs


def container_argv(target, argv, cwd):
    """argv (paths as the container sees them) run in a container of
    target: new mount and PID namespaces (unshare --mount --pid --fork
    --kill-child: the command is pid 1 of its namespace, and when it dies
    the kernel kills the rest of the namespace), that namespace's /proc
    mounted inside the root, a private tmpfs on its /tmp, container_binds()
    bind-mounted at their host paths, then chroot into the root and cd to
    cwd.  Nothing is mounted outside the new mount namespace."""
    root = os.path.realpath(target.chroot)
    return (["unshare", "--mount", "--pid", "--fork", "--kill-child",
             "--mount-proc=" + os.path.join(root, "proc"), "--",
             "/bin/sh", "-c", _CONTAINER_SH, "xb-container", root, cwd]
            + container_binds() + ["--"] + list(argv))


def _proc_children():
    """{ppid: [pid, ...]} of every process now."""
    kids = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p, "rb") as f:
                st = f.read()
            ppid = int(st[st.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(p))
    return kids


def ns_pids(pid):
    """The pid of host process PID in each PID namespace it is in, outermost
    first (/proc/PID/status NSpid), or [] if it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def _gone_or_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            st = f.read()
        return st[st.rindex(b")") + 2:].split()[0] in (b"Z", b"X")
    except (OSError, ValueError, IndexError):
        return True


def container_host_pid(launcher, ns_pid):
    """The host pid of the process that is ns_pid in the PID namespace of
    launcher's descendants (launcher: the unshare process), or None."""
    kids = _proc_children()
    todo, seen = list(kids.get(launcher, [])), set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        nsp = ns_pids(p)
        if len(nsp) >= 2 and nsp[-1] == ns_pid:
            return p
        todo += kids.get(p, [])
    return None


# ---------------------------------------------------------------------------
# workloads

def compiled_workloads(target):
    """Directory with tests/workloads/*.erl compiled by target's erlc (cached
    per run); a container target's own erlc runs inside it."""
    src = sorted(f for f in os.listdir(WORKLOADS) if f.endswith(".erl"))
    stamp = "%d" % max(os.stat(os.path.join(WORKLOADS, f)).st_mtime_ns for f in src)
    out = os.path.join(run_dir(), "ebin", target.name)
    marker = os.path.join(out, ".stamp")
    try:
        with open(marker) as f:
            if f.read() == stamp:
                return out
    except OSError:
        pass
    tmp = tempfile.mkdtemp(prefix="ebin-", dir=run_dir())
    if target.container:
        # the sources where the container sees them (the run directory)
        srcdir = os.path.join(tmp, "src")
        os.makedirs(srcdir)
        for f in src:
            shutil.copy(os.path.join(WORKLOADS, f), srcdir)
        argv = container_argv(target, [target.in_root(target.erlc), "-o", tmp]
                              + [os.path.join(srcdir, f) for f in src], cwd=tmp)
        r = run_cmd(argv, timeout=180)
        shutil.rmtree(srcdir, True)
    else:
        r = run_cmd([target.erlc, "-o", tmp] + [os.path.join(WORKLOADS, f) for f in src],
                    timeout=120)
    if r.rc != 0:
        shutil.rmtree(tmp, True)
        raise RuntimeError("compiling workloads with %s failed:\n%s\n%s"
                           % (target.erlc, r.out, r.err))
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(stamp)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    shutil.rmtree(out, True)
    os.rename(tmp, out)
    return out


# ---------------------------------------------------------------------------
# a VM under test

_live_vms = set()


class VMError(Exception):
    pass


class VM:
    """A running VM of `target`, controlled through xb_ctl (see module doc)."""

    def __init__(self, target, extra_args=(), schedulers=2, start_timeout=30, env=None):
        if not target.present:
            skip_because("target-not-built", target, "%s: %s" % (target.name, target.missing))
        if target.container and os.geteuid() != 0:
            skip_because("needs-root", target, "%s runs in namespaces of its own (unshare, chroot)"
                         % target.name)
        self.target = target
        self.extra_args = list(extra_args)
        if any(a.startswith("+JP") for a in self.extra_args) and not target.jit:
            skip_because("jit-only", target, "%s is an %s VM; %s is JIT-only"
                         % (target.name, target.flavor, " ".join(self.extra_args)))
        self.schedulers = schedulers
        self.start_timeout = start_timeout
        self.env = env
        self.proc = None
        self.pid = None
        self.ns_pid = None
        self.otp_release = None
        self.flavor = None
        self._lines = []
        self._answers = {}
        self._cond = threading.Condition()
        self._seq = 0
        self._eof = False
        self._pgfile = None
        self.stderr_path = None

    # -- lifecycle
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()
        return False

    def start(self):
        ebin = compiled_workloads(self.target)
        erl = self.target.in_root(self.target.erl)
        argv = [erl, "-noshell", "+S", "%d:%d" % (self.schedulers, self.schedulers)]
        argv += self.extra_args
        argv += ["-pa", ebin, "-eval", "xb_ctl:start()."]
        if self.target.container:
            # (the container sees the run directory, thus ebin, and tmpdir()
            # at their host paths)
            argv = container_argv(self.target, argv, cwd=tmpdir())
        env = dict(os.environ)
        for k in ("ERL_FLAGS", "ERL_AFLAGS", "ERL_ZFLAGS", "ERL_LIBS", "ERL_ROOTDIR",
                  "ERL_CRASH_DUMP_SECONDS"):
            env.pop(k, None)
        env["ERL_CRASH_DUMP_SECONDS"] = "0"   # no crash dumps when we kill it
        if self.env:
            env.update(self.env)
        self.stderr_path = os.path.join(tmpdir(), "vm-%s-%d.stderr" % (self.target.name, id(self)))
        errf = open(self.stderr_path, "wb")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=errf, env=env, cwd=tmpdir(),
                                         start_new_session=True)
        finally:
            errf.close()
        _live_vms.add(self)
        self._register_pgid()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout
        with self._cond:
            while "ready" not in self._answers:
                left = deadline - time.monotonic()
                if self._eof or left <= 0 or self.proc.poll() is not None:
                    break
                self._cond.wait(min(left, 0.2))
        ready = self._answers.get("ready")
        if not ready:
            self.kill()
            raise VMError("VM %s did not become ready within %ds (%s)\n%s"
                          % (self.target.name, self.start_timeout,
                             "exited %s" % self.proc.returncode
                             if self.proc.returncode is not None else "still running",
                             self.output_tail()))
        ospid, self.otp_release, self.flavor = ready
        self.ns_pid = int(ospid)
        if self.target.container:
            # The VM knows its pid in its own namespace; the tools need the
            # host's: the unshare process's descendant that has that pid there.
            self.pid = container_host_pid(self.proc.pid, self.ns_pid)
            if self.pid is None:
                self.kill()
                raise VMError("VM %s reports pid %s in its namespace, but no descendant of the "
                              "unshare process %d has it" % (self.target.name, ospid, self.proc.pid))
        else:
            self.pid = self.proc.pid
            if self.ns_pid != self.pid:
                self.kill()
                raise VMError("VM reports OS pid %s but we started pid %d" % (ospid, self.pid))
        exe = os.readlink("/proc/%d/exe" % self.pid)
        if not os.path.basename(exe).startswith("beam"):
            self.kill()
            raise VMError("/proc/%d/exe is %s, not a beam" % (self.pid, exe))
        if self.target.container and not exe.startswith(os.path.realpath(self.target.chroot) + "/"):
            self.kill()
            raise VMError("/proc/%d/exe is %s, not inside the root %s"
                          % (self.pid, exe, self.target.chroot))
        self.exe = exe
        return self

    def _register_pgid(self):
        self._pgfile = _pgid_file(self.proc.pid)
        with open(self._pgfile, "w") as f:
            f.write("vm " + self.target.name)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL the VM's whole process group (beam.smp, erl_child_setup, ...;
        a container's unshare process and beam.smp, pid 1 of its namespace,
        whose death ends every other process in it)."""
        if self.proc is None:
            return
        _killpg(self.proc.pid)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if self.target.container and self.pid:
            # beam.smp is not our child (unshare's): wait until it is gone
            # (or a zombie its new parent has yet to reap)
            wait_for(lambda: _gone_or_zombie(self.pid), timeout=10)
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except Exception:
                pass
        _live_vms.discard(self)
        if self._pgfile:
            try:
                os.unlink(self._pgfile)
            except OSError:
                pass
            self._pgfile = None

    # -- stdout reader
    def _read_loop(self):
        f = self.proc.stdout
        for raw in iter(f.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._cond:
                if line.startswith("XB-ANSWER "):
                    parts = line.split(" ", 3)
                    if len(parts) == 4:
                        self._answers[parts[1]] = (parts[2], parts[3])
                elif line.startswith("XB-READY "):
                    self._answers["ready"] = line.split()[1:4]
                else:
                    self._lines.append(line)
                    del self._lines[:-200]
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def output_tail(self):
        out = "\n".join(self._lines[-20:])
        err = ""
        try:
            with open(self.stderr_path, "rb") as f:
                err = f.read()[-3000:].decode("utf-8", "replace")
        except (OSError, TypeError):
            pass
        return "VM stdout tail:\n%s\nVM stderr tail:\n%s" % (out, err)

    # -- evaluation
    def _request(self, kind, expr, timeout):
        if not self.alive():
            raise VMError("VM %s is not running" % self.target.name)
        with self._cond:
            self._seq += 1
            rid = str(self._seq)
        data = base64.b64encode(expr.encode("utf-8")).decode("ascii")
        try:
            self.proc.stdin.write(("%s %s %s\n" % (kind, rid, data)).encode("ascii"))
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise VMError("VM %s: cannot send request: %s" % (self.target.name, e))
        deadline = time.monotonic() + timeout
        with self._cond:
            while rid not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise VMError("VM %s: no answer to %r within %ss"
                                  % (self.target.name, expr[:200], timeout))
                if self._eof:
                    raise VMError("VM %s exited while evaluating %r\n%s"
                                  % (self.target.name, expr[:200], self.output_tail()))
                self._cond.wait(min(left, 0.2))
            status, payload = self._answers.pop(rid)
        body = base64.b64decode(payload)
        if status != "ok":
            raise VMError("VM %s: %s raised %s" % (self.target.name, expr[:200],
                                                  body.decode("utf-8", "replace")))
        return body

    def eval(self, expr, timeout=30):
        """Evaluate Erlang expressions in the VM; the value printed with ~p."""
        return self._request("E", expr, timeout).decode("utf-8")

    def eval_raw(self, expr, timeout=60):
        """Evaluate; the value must be iodata; returns its bytes."""
        return self._request("R", expr, timeout)

    def start_workload(self, module, *args):
        return self.eval("%s:start(%s)" % (module, ", ".join(str(a) for a in args)))

    spawn_workload = start_workload

    def wait_code_quiet(self, quiet=0.5, timeout=20):
        """Wait until the set of loaded modules stops changing for `quiet` s."""
        last, since = None, time.monotonic()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            n = self.eval("length(code:all_loaded())")
            if n != last:
                last, since = n, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return True
            time.sleep(0.1)
        return False


def wait_file_stable(path, quiet=0.5, timeout=20):
    """Wait until path exists and its size has not changed for `quiet` s."""
    last, since = None, time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            sz = os.stat(path).st_size
        except FileNotFoundError:
            sz = None
        if sz != last:
            last, since = sz, time.monotonic()
        elif sz is not None and time.monotonic() - since >= quiet:
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------
# perf map files

def parse_perf_map(text, strip_dollar=True):
    """[(start, size, name)] from perf map text: "START SIZE NAME" per line,
    hex with or without 0x; the VM's own map prefixes names with '$'."""
    out = []
    for ln, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(" ", 2)
        if len(parts) != 3:
            raise ValueError("perf map line %d malformed: %r" % (ln, line))
        start, size = int(parts[0], 16), int(parts[1], 16)
        name = parts[2]
        if strip_dollar and name.startswith("$"):
            name = name[1:]
        out.append((start, size, name))
    return out


def read_perf_map(path, strip_dollar=True):
    with open(path, "rb") as f:
        return parse_perf_map(f.read().decode("utf-8", "replace"), strip_dollar)
