"""erlang-sample --check and release selection.

- --check passes on every VM (every cell of the matrix);
- it fails, with FAIL lines naming what it saw, when a wrong release table
  is forced (EXTROSPECT_FORCE_RELEASE, meant for exactly this test);
- (a VM of a release with no table runs on the nearest one, its offsets
  proven on it: test_releases.py)
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
