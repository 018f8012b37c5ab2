"""The Debian package, in the `package` suite:

    pytest --suite package      (or tests/run-all.sh --suite package)

scripts/build-deb.sh builds dist/extrospect-beam_VERSION_ARCH.deb; the test
installs it with `apt-get install ./extrospect-beam_*.deb` into a clean
Debian 12 root (debootstrap --variant=minbase, built once and cached under
/var/cache/extrospect-beam/roots; each run works on an overlay of it, so the
cached root stays clean; downloaded .debs are cached too), checks that the
root has no compiler, then runs from the installed files, chrooted:
`erlang-sample --version`, `man -w`-style presence of the pages, and a short
profile of a VM running on the host (chroot shares the PID namespace; /proc
is mounted in the root).  The first run (debootstrap) takes a few minutes.

test_deb_contents runs in the default suite (what CI runs): it builds the
package and checks its files, its Depends and its unpacked tools against a
VM, with no debootstrap; the clean-root install stays in the
package suite because a fresh machine's debootstrap (minutes, and the
network) does not fit the default suite's time.
"""

import os
import re
import shutil
import subprocess
import time

from xbtest import (CACHE, ROOT, VM, check, log, per_vm, run_cmd, skip_because, suite, timeout, tmpdir)
from xbsample import wait_running

ROOTS = os.path.join(CACHE, "roots")
BASE = os.path.join(ROOTS, "bookworm-minbase")
ARCHIVES = os.path.join(ROOTS, "apt-archives")
MIRROR = "http://deb.debian.org/debian"


def sh(argv, timeout=600, env=None):
    r = run_cmd(argv, timeout=timeout, env=env)
    check(r.rc == 0, "%s failed" % " ".join(argv), r.describe() + "\n" + r.out[-3000:])
    return r


def ensure_base_root():
    """A minimal bookworm root with its package lists, built once."""
    if os.path.exists(os.path.join(BASE, ".xb-complete")):
        return False
    if not shutil.which("debootstrap"):
        skip_because("needs-package", None, "debootstrap is not installed (tests/run-all.sh --suite package "
                     "installs it)")
    os.makedirs(ROOTS, exist_ok=True)
    tmp = BASE + ".tmp"
    shutil.rmtree(tmp, True)
    sh(["debootstrap", "--variant=minbase", "bookworm", tmp, MIRROR], timeout=1500)
    with open(os.path.join(tmp, "etc", "apt", "sources.list"), "w") as f:
        f.write("deb %s bookworm main\ndeb %s bookworm-updates main\n"
                "deb http://deb.debian.org/debian-security bookworm-security main\n" % (MIRROR, MIRROR))
    with chrooted(tmp) as r:
        sh(["chroot", r, "apt-get", "update", "-qq"], timeout=600)
    shutil.rmtree(BASE, True)
    os.rename(tmp, BASE)
    with open(os.path.join(BASE, ".xb-complete"), "w") as f:
        f.write(time.strftime("%Y-%m-%d %H:%M:%S\n"))
    return True


class chrooted:
    """/proc, /dev and resolv.conf for commands run with chroot in ROOT."""

    def __init__(self, root):
        self.root = root
        self.mounts = []

    def __enter__(self):
        for what, where, args in (("proc", "proc", ["-t", "proc"]), ("/dev", "dev", ["--bind"])):
            target = os.path.join(self.root, where)
            os.makedirs(target, exist_ok=True)
            sh(["mount"] + args + [what, target], timeout=30)
            self.mounts.append(target)
        shutil.copy("/etc/resolv.conf", os.path.join(self.root, "etc", "resolv.conf"))
        return self.root

    def __exit__(self, *exc):
        for m in reversed(self.mounts):
            run_cmd(["umount", "-l", m], timeout=30)
        return False


class overlay:
    """A throw-away writable copy of BASE (overlayfs; a plain copy if the
    kernel refuses), with the persistent .deb cache bind-mounted."""

    def __init__(self):
        d = tmpdir()
        self.upper, self.work, self.root = (os.path.join(d, n) for n in ("upper", "work", "root"))
        self.mounted = []

    def __enter__(self):
        for p in (self.upper, self.work, self.root):
            os.makedirs(p)
        r = run_cmd(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s"
                     % (BASE, self.upper, self.work), self.root], timeout=30)
        if r.rc == 0:
            self.mounted.append(self.root)
        else:
            log("overlayfs refused (%s); copying the root" % r.err.strip())
            os.rmdir(self.root)
            sh(["cp", "-a", BASE, self.root], timeout=600)
        os.makedirs(ARCHIVES + "/partial", exist_ok=True)
        arch = os.path.join(self.root, "var", "cache", "apt", "archives")
        sh(["mount", "--bind", ARCHIVES, arch], timeout=30)
        self.mounted.append(arch)
        return self.root

    def __exit__(self, *exc):
        for m in reversed(self.mounted):
            run_cmd(["umount", "-l", m], timeout=30)
        return False


@suite("package")
@timeout(1800)
@per_vm(only=["stock"])
def test_deb_installs_and_runs(target):
    if os.getuid() != 0:
        skip_because("needs-root", target, "debootstrap, mount and chroot need root")
    dist = os.path.join(tmpdir(), "dist")
    t0 = time.monotonic()
    r = sh([os.path.join(ROOT, "scripts", "build-deb.sh"), dist], timeout=900)
    debs = [f for f in os.listdir(dist) if re.match(r"extrospect-beam_.*\.deb$", f)]
    check(len(debs) == 1, "build-deb.sh made %s" % debs, r.err)
    log(r.err.strip().splitlines()[-1] + " in %.0f s" % (time.monotonic() - t0))
    t0 = time.monotonic()
    if ensure_base_root():
        log("built the cached root %s in %.0f s" % (BASE, time.monotonic() - t0))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    with overlay() as root, chrooted(root):
        shutil.copy(os.path.join(dist, debs[0]), os.path.join(root, "tmp", debs[0]))
        r = run_cmd(["chroot", root, "sh", "-c", "command -v gcc || command -v cc || command -v meson"],
                    timeout=30)
        check(r.rc != 0, "the clean root has a compiler or meson: %s" % r.out.strip())
        t0 = time.monotonic()
        sh(["chroot", root, "apt-get", "install", "-y", "-q", "--no-install-recommends",
            "/tmp/" + debs[0]], timeout=900, env=env)
        log("apt-get install ./%s in the clean root: %.0f s" % (debs[0], time.monotonic() - t0))
        r = sh(["chroot", root, "erlang-sample", "--version"], timeout=30)
        check(re.match(r"^erlang-sample \d+\.\d+\.\d+$", r.out.strip()), "--version: %r" % r.out)
        sh(["chroot", root, "erlang-write-perf-map", "--version"], timeout=30)
        sh(["chroot", root, "erlang-heapsample", "--version"], timeout=30)
        for page in ("erlang-sample.1.gz", "erlang-write-perf-map.1.gz", "erlang-heapsample.1.gz"):
            check(os.path.exists(os.path.join(root, "usr/share/man/man1", page)), "%s not installed" % page)
        with VM(target) as vm:
            vm.eval("xb_split:start(75)")
            wait_running(vm, "xb_split")
            r = run_cmd(["chroot", root, "erlang-sample", "-d", "2", "-t", "5", str(vm.pid)], timeout=60)
            check(r.rc == 0, "the installed erlang-sample failed", r.describe())
            check(re.search(r"^\s*\d+\s+xb_split:hot_a/1\s+\d+\.\d+%\s+\[Erlang\]$", r.out, re.M),
                  "the installed erlang-sample does not show xb_split:hot_a/1", r.out)
            log("from the installed package:\n" + r.out.strip())
            r = run_cmd(["chroot", root, "erlang-heapsample", "-t", "100", str(vm.pid)], timeout=60)
            check(r.rc == 0 and re.search(r"xb_split", r.out), "the installed erlang-heapsample "
                  "does not list the xb_split process", r.describe())


@per_vm(only=["stock"])
@timeout(600)
def test_deb_contents(target):
    """In the default suite (no debootstrap, no clean root): scripts/build-deb.sh
    builds, the package holds the three tools and their pages and nothing
    else, depends on the Debian libraries they link, and its tools, unpacked,
    profile a VM.  test_deb_installs_and_runs (--suite package) installs it
    into a clean Debian 12 root."""
    dist = os.path.join(tmpdir(), "dist")
    sh([os.path.join(ROOT, "scripts", "build-deb.sh"), dist], timeout=450)
    debs = [f for f in os.listdir(dist) if re.match(r"extrospect-beam_.*\.deb$", f)]
    check(len(debs) == 1, "build-deb.sh made %s" % debs)
    deb = os.path.join(dist, debs[0])
    depends = sh(["dpkg-deb", "-f", deb, "Depends"], timeout=30).out
    for lib in ("libdw1", "libelf1", "libbpf1", "libprotobuf-c1", "libdebuginfod1", "zlib1g", "libc6"):
        check(re.search(r"\b%s\b" % re.escape(lib), depends), "Depends lacks %s: %s" % (lib, depends))
    files = [l.split()[-1].lstrip(".") for l in sh(["dpkg-deb", "-c", deb], timeout=30).out.splitlines()
             if not l.startswith("d")]
    want = {"/usr/bin/" + t for t in ("erlang-sample", "erlang-write-perf-map", "erlang-heapsample")} | \
           {"/usr/share/man/man1/%s.1.gz" % t for t in ("erlang-sample", "erlang-write-perf-map",
                                                        "erlang-heapsample")}
    check(want <= set(files), "missing from the package: %s" % sorted(want - set(files)), "\n".join(files))
    extra = [f for f in files if f not in want and not f.startswith("/usr/share/doc/extrospect-beam/")]
    check(not extra, "unexpected files in the package: %s" % extra)
    root = os.path.join(tmpdir(), "unpacked")
    sh(["dpkg-deb", "-x", deb, root], timeout=60)
    with VM(target) as vm:
        vm.eval("xb_split:start(75)")
        wait_running(vm, "xb_split")
        r = run_cmd([os.path.join(root, "usr", "bin", "erlang-sample"), "-d", "1", "-t", "5", str(vm.pid)],
                    timeout=60)
        check(r.rc == 0 and re.search(r"^\s*\d+\s+xb_split:hot_a/1\s+\d+\.\d+%\s+\[Erlang\]$", r.out, re.M),
              "the packaged erlang-sample does not show xb_split:hot_a/1", r.describe() + r.out)
        r = run_cmd([os.path.join(root, "usr", "bin", "erlang-heapsample"), "-t", "100", str(vm.pid)], timeout=60)
        check(r.rc == 0 and "xb_split" in r.out, "the packaged erlang-heapsample does not list xb_split",
              r.describe() + r.out)
    log("%s: %d files; Depends: %s" % (debs[0], len(files), depends.strip()))
