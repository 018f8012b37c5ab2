"""erlang-sample --check and release selection.

- --check passes on every VM (every cell of the matrix);
- it fails, with FAIL lines naming what it saw, when a wrong release table
  is forced (EXTROSPECT_FORCE_RELEASE, meant for exactly this test);
- a VM of a release with no table and no DWARF is refused with one line
  naming the release found, the supported releases, and how to proceed.
"""

import os
import re
import shutil
import subprocess
import time

from xbtest import VM, Target, check, log, per_vm, run_tool, skip_because, stock_target, tmpdir

TOOL = "erlang-sample"
TABLES = ["13.1.5", "15.2.7", "17.1"]


@per_vm()
def test_check_passes(target):
    with VM(target, schedulers=2) as vm:
        r = run_tool(TOOL, "--check", str(vm.pid), timeout=60)
        lines = r.out.splitlines()
        fails = [l for l in lines if l.startswith("FAIL")]
        check(r.rc == 0 and not fails, "--check failed (exit %s)" % r.rc, r.out + r.err)
        check(len([l for l in lines if l.startswith("ok")]) >= 9, "too few checks ran", r.out)
        check(re.search(r"^\d+ checks passed, 0 failed$", r.out, re.M), "no summary line", r.out)
        if target.debug == "dwarf":
            # README: offsets come from DWARF and are cross-checked against
            # the table; --check reports any difference.
            check(re.search(r"^ok\s+table-vs-dwarf\s+(\d+) of \1 fields agree", r.out, re.M),
                  "no table-vs-dwarf cross-check on a beam with DWARF", r.out)
        log(lines[0])


@per_vm()
def test_check_catches_wrong_table(target):
    with VM(target, schedulers=2) as vm:
        wrong = next(t for t in TABLES if t != target.erts)
        env = dict(os.environ, EXTROSPECT_FORCE_RELEASE=wrong)
        r = run_tool(TOOL, "--check", str(vm.pid), timeout=60, env=env)
        fails = [l for l in r.out.splitlines() if l.startswith("FAIL")]
        check(r.rc == 1 and fails, "a forced wrong table (erts %s on erts %s) passed --check"
              % (wrong, target.erts), r.out + r.err)
        check(any(l.split()[1] in ("release-table", "attach") for l in fails),
              "the release-table line does not fail", r.out)
        if target.debug == "dwarf":
            # README: the table is cross-checked against the beam's DWARF
            # and --check reports any difference, naming the first
            check(re.search(r"^FAIL\s+table-vs-dwarf\s+\d+ of \d+ fields agree with this beam's DWARF; "
                            r"first: .+ table -?\d+, DWARF -?\d+$", r.out, re.M),
                  "a wrong table on a beam with DWARF: no table-vs-dwarf difference reported", r.out)
        log("%d FAIL lines with erts %s forced, e.g. %s" % (len(fails), wrong, fails[-1]))


def test_unknown_release_refused():
    """A VM whose release has no table and whose beam has no DWARF: a copy
    of Debian's OTP with its erts directory renamed to an unknown version.
    """
    stock = stock_target()
    if not stock.present:
        skip_because("needs-package", None, "erlang-base: " + stock.missing)
    check(stock.debug == "dynsym", "stock beam.smp carries debug info (%s) here: this test needs "
          "Debian's stripped beam" % stock.debug)
    root = os.path.join(tmpdir(), "otp-unknown")
    shutil.copytree(stock.root, root, symlinks=True)
    old = "erts-" + stock.erts
    new_vsn = stock.erts + ".99"
    os.rename(os.path.join(root, old), os.path.join(root, "erts-" + new_vsn))
    for rel in ("bin/erl", "erts-%s/bin/erl" % new_vsn):
        p = os.path.join(root, rel)
        if os.path.exists(p):
            with open(p) as f:
                text = f.read()
            text = re.sub(r'(?m)^(\s*)ROOTDIR=.*$', lambda m: '%sROOTDIR="%s"' % (m.group(1), root), text)
            text = text.replace(old, "erts-" + new_vsn)
            with open(p, "w") as f:
                f.write(text)
    sed = os.path.join(root, "releases", "start_erl.data")
    with open(sed) as f:
        data = f.read()
    with open(sed, "w") as f:
        f.write(data.replace(stock.erts, new_vsn))
    target = Target("unknown", dict(stock.info, name="unknown", erts=new_vsn, root=root,
                                    erl=os.path.join(root, "bin", "erl"),
                                    beam=os.path.join(root, "erts-" + new_vsn, "bin", "beam.smp")))
    with VM(target, schedulers=1) as vm:
        r = run_tool(TOOL, "-d", "1", str(vm.pid), timeout=30)
        lines = [l for l in r.err.splitlines() if l.strip()]
        check(r.rc > 0 and len(lines) == 1, "expected one line and a non-zero exit", r.describe())
        msg = lines[0]
        check(new_vsn in msg, "the message does not name the release found (%s)" % new_vsn, msg)
        check(all(t in msg for t in TABLES), "the message does not list the supported releases", msg)
        check("debug" in msg and "-g" in msg, "the message does not say how to proceed", msg)
        r2 = run_tool("erlang-write-perf-map", "-o", "-", str(vm.pid), timeout=30)
        lines2 = [l for l in r2.err.splitlines() if l.strip()]
        check(r2.rc > 0 and len(lines2) == 1 and "unsupported release" in lines2[0] and new_vsn in lines2[0]
              and not r2.out.strip(), "erlang-write-perf-map did not refuse with one line naming %s and an "
              "empty map" % new_vsn, r2.describe() + r2.out[:500])
        log(msg)
        # erlang-heapsample reads the same tables: the same refusal, one
        # line, in each of its modes
        for args in ([], ["--alloc"], ["--contents", "<0.0.0>"], ["--interval", "1", "--count", "2"]):
            what = "erlang-heapsample %s" % (" ".join(args) or "(processes)")
            r3 = run_tool("erlang-heapsample", *(args + [str(vm.pid)]), timeout=30)
            lines3 = [l for l in r3.err.splitlines() if l.strip()]
            check(r3.rc == 1 and len(lines3) == 1 and not r3.out.strip(),
                  "%s: expected exit 1, one line and nothing on stdout" % what, r3.describe() + r3.out)
            check(new_vsn in lines3[0] and all(t in lines3[0] for t in TABLES),
                  "%s: the line does not name the release found (%s) and the supported ones" % (what, new_vsn),
                  lines3[0])
        log(lines3[0])
